// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Rewrites references to the whole schema (`"$ref": "#"`) into references to a definition that holds a copy of
/// the root, so every backend's converter can follow them.
///
/// JSON Schema allows `#` (Pydantic does not emit it, hand-written recursive schemas do), but schema-to-grammar
/// converters such as llama.cpp's follow only `#/$defs/<name>`. The normalized schema therefore keeps its root as
/// it is — an object with `properties` stays one, which chat templates and tool renderers read — and adds the root,
/// minus its definitions, as `$defs/<name>`; every `#` in both becomes `#/$defs/<name>`. The values it describes
/// are exactly the same; the schema grows by at most one copy of its root.
enum RootReferenceLifter {
    /// `schema` with root references lifted, or `schema` unchanged when it has none.
    static func lifted(_ schema: JSONValue) -> JSONValue {
        guard case .object(var root) = schema, refersToRoot(schema) else { return schema }
        let definitions = root["$defs"]?.objectValue ?? [:]
        var name = "root"
        var suffix = 1
        while definitions.contains(key: name) {
            suffix += 1
            name = "root_\(suffix)"
        }
        let target = JSONValue.string("#/$defs/\(name)")
        var copy = root
        _ = copy.removeValue(forKey: "$defs")
        _ = copy.removeValue(forKey: "definitions")
        var lifted = definitions.reduce(into: JSONObject()) { $0[$1.key] = $1.value }
        lifted[name] = .object(copy)
        root["$defs"] = .object(lifted)
        return replacingRootReferences(in: .object(root), with: target)
    }

    /// The keywords whose values are objects of named schemas (`items` holds one schema, `anyOf` an array of them);
    /// `enum`, `const`, `default` and `examples` hold data and are never rewritten.
    private static let schemaMaps: Set<String> = ["properties", "$defs", "definitions"]

    private static func refersToRoot(_ node: JSONValue) -> Bool {
        guard case .object(let schema) = node else { return false }
        if schema["$ref"] == .string("#") { return true }
        for (key, value) in schema {
            switch key {
            case "items":
                if refersToRoot(value) { return true }
            case "anyOf":
                if value.arrayValue?.contains(where: refersToRoot) == true { return true }
            case _ where schemaMaps.contains(key):
                if value.objectValue?.values.contains(where: refersToRoot) == true { return true }
            default:
                continue
            }
        }
        return false
    }

    private static func replacingRootReferences(in node: JSONValue, with target: JSONValue) -> JSONValue {
        guard case .object(let schema) = node else { return node }
        var output = JSONObject()
        for (key, value) in schema {
            switch key {
            case "$ref" where value == .string("#"):
                output[key] = target
            case "items":
                output[key] = replacingRootReferences(in: value, with: target)
            case "anyOf":
                output[key] = value.arrayValue.map { .array($0.map { replacingRootReferences(in: $0, with: target) }) }
                    ?? value
            case _ where schemaMaps.contains(key):
                output[key] =
                    value.objectValue.map { members in
                        .object(members.reduce(into: JSONObject()) {
                            $0[$1.key] = replacingRootReferences(in: $1.value, with: target)
                        })
                    } ?? value
            default:
                output[key] = value
            }
        }
        return .object(output)
    }
}
