// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Re-serializes a structured answer with every object's keys in its schema's property order (then any keys
/// the schema does not name, in the answer's order), following `$ref` into `$defs` and the object branches of
/// `anyOf`.
enum SchemaOrder {
    static func reorder(_ value: JSONValue, schema: JSONValue) -> JSONValue {
        reorder(value, schema: schema, root: schema, depth: 0)
    }

    private static func reorder(_ value: JSONValue, schema: JSONValue, root: JSONValue, depth: Int) -> JSONValue {
        guard depth < 64 else { return value }
        let schema = resolve(schema, root: root)
        switch value {
        case .object(let object):
            if let branches = schema["anyOf"]?.arrayValue {
                // The branch whose properties cover the answer's keys best.
                let best = branches.map { resolve($0, root: root) }.max { lhs, rhs in
                    overlap(object, lhs) < overlap(object, rhs)
                }
                if let best { return reorder(value, schema: best, root: root, depth: depth + 1) }
            }
            let properties = schema["properties"]?.objectValue ?? JSONObject()
            var ordered = JSONObject()
            for key in properties.keys {
                if let member = object[key], let propertySchema = properties[key] {
                    ordered[key] = reorder(member, schema: propertySchema, root: root, depth: depth + 1)
                }
            }
            for (key, member) in object where ordered[key] == nil { ordered[key] = member }
            return .object(ordered)
        case .array(let items):
            guard let itemSchema = schema["items"] else { return value }
            return .array(items.map { reorder($0, schema: itemSchema, root: root, depth: depth + 1) })
        default:
            return value
        }
    }

    private static func overlap(_ object: JSONObject, _ schema: JSONValue) -> Int {
        let keys = Set(schema["properties"]?.objectValue?.keys ?? [])
        return object.keys.filter(keys.contains).count
    }

    /// Follows `{"$ref":"#/$defs/Name"}` (or `#/definitions/Name`) a bounded number of times.
    private static func resolve(_ schema: JSONValue, root: JSONValue) -> JSONValue {
        var current = schema
        for _ in 0..<16 {
            guard let reference = current["$ref"]?.stringValue else { return current }
            let parts = reference.split(separator: "/").map(String.init)
            guard parts.count == 3, parts[0] == "#", let target = root[parts[1]]?[parts[2]] else { return current }
            current = target
        }
        return current
    }
}
