// SPDX-License-Identifier: Apache-2.0
public import AFMJSON

/// Checks a JSON value against a schema that ``ToolSchemaValidator`` normalized: the host's last word on a
/// structured answer before it calls the response `completed`, whichever backend wrote it.
///
/// It enforces exactly what the subset enforces: `type` (with `["<type>", "null"]`), `enum`, `const`, `anyOf`,
/// `$ref` (to `#`, `#/$defs/<name>`, `#/definitions/<name>`), `properties`, `required`,
/// `additionalProperties: false` (made explicit on every object by normalization), `items`,
/// `minItems`/`maxItems`, `minLength`/`maxLength` and the numeric bounds. Keywords the subset keeps only as description text (`pattern`,
/// `format`, …) are not checked here either: they were never promised.
///
/// The cost is one walk of the value per referenced schema at most: references are looked up in a table built
/// once per schema, and the verdict for a value checked against a reference is remembered, so `anyOf` branches
/// that recurse through the same definition do not check the same subtree again (without that a recursive union
/// of two object branches took 2^depth steps on a valid answer). The walk's depth is the value's depth (the parser
/// bounds it), so a recursive schema cannot loop.
public struct SchemaInstanceValidator: Sendable, Hashable {
    /// The schema checked against.
    public let schema: JSONValue
    /// Referable schemas by canonical reference (`#`, `#/$defs/<name>`, `#/definitions/<name>`).
    private let targets: [String: JSONObject]
    /// References followed in a row without consuming input; normalized schemas have no such cycles, so this
    /// only guards against a schema that did not come from ``ToolSchemaValidator``.
    private static let maximumReferenceChain = 64

    /// Prepares the checks for a normalized schema.
    public init(schema: JSONValue) {
        self.schema = schema
        var targets: [String: JSONObject] = [:]
        if case .object(let root) = schema {
            targets["#"] = root
            for container in ["$defs", "definitions"] {
                guard case .object(let definitions) = root[container] ?? .null else { continue }
                for (name, definition) in definitions {
                    if case .object(let target) = definition { targets["#/\(container)/\(name)"] = target }
                }
            }
        }
        self.targets = targets
    }

    /// The first place where `value` does not match the schema, or nil when it matches.
    public func violation(of value: JSONValue) -> SchemaViolation? {
        var verdicts: [Visit: SchemaViolation?] = [:]
        return check(value, schema.objectValue ?? [:], path: "$", chain: 0, &verdicts)
    }

    /// A value (named by its path in the answer, which is unambiguous) checked against a referenced schema.
    private struct Visit: Hashable {
        var path: String
        var reference: String
    }

    // MARK: - The walk

    private func check(
        _ value: JSONValue, _ schema: JSONObject, path: String, chain: Int, _ verdicts: inout [Visit: SchemaViolation?]
    ) -> SchemaViolation? {
        if case .string(let reference)? = schema["$ref"] {
            guard chain < Self.maximumReferenceChain, case .success(let canonical) = SchemaReferences.canonical(reference),
                let target = targets[canonical]
            else {
                return SchemaViolation(path: path, message: "the schema's reference \(reference) cannot be followed")
            }
            let visit = Visit(path: path, reference: canonical)
            if let known = verdicts[visit] { return known }
            let verdict = check(value, target, path: path, chain: chain + 1, &verdicts)
            verdicts[visit] = verdict
            return verdict
        }
        if case .array(let branches)? = schema["anyOf"] {
            var first: SchemaViolation?
            var nonNullBranches = 0
            for branch in branches {
                let branchSchema = branch.objectValue ?? [:]
                guard let problem = check(value, branchSchema, path: path, chain: chain + 1, &verdicts) else { return nil }
                if !(branchSchema["type"] == "null") {
                    nonNullBranches += 1
                    if first == nil { first = problem }
                }
            }
            // With one non-null branch (an Optional) its own complaint is the useful one.
            if nonNullBranches == 1, let first { return first }
            return SchemaViolation(path: path, message: "\(Self.describe(value)) matches none of the anyOf branches")
        }
        if let enumeration = schema["enum"]?.arrayValue, !enumeration.contains(where: { Self.equal($0, value) }) {
            return SchemaViolation(path: path, message: "\(Self.describe(value)) is not one of the enum values")
        }
        if let constant = schema["const"], !Self.equal(constant, value) {
            return SchemaViolation(path: path, message: "\(Self.describe(value)) is not the const \(constant.jsonString)")
        }
        if let type = schema["type"], !Self.matches(value, type: type) {
            return SchemaViolation(path: path, message: "expected \(Self.typeText(type)), found \(value.typeName)")
        }
        switch value {
        case .object(let object):
            return checkObject(object, schema, path: path, &verdicts)
        case .array(let elements):
            return checkArray(elements, schema, path: path, &verdicts)
        case .number(let number):
            return checkNumber(number, schema, path: path)
        case .string(let text):
            return checkString(text, schema, path: path)
        default:
            return nil
        }
    }

    private func checkObject(
        _ object: JSONObject, _ schema: JSONObject, path: String, _ verdicts: inout [Visit: SchemaViolation?]
    ) -> SchemaViolation? {
        let properties = schema["properties"]?.objectValue ?? [:]
        if case .array(let required)? = schema["required"] {
            for case .string(let name) in required where !object.contains(key: name) {
                return SchemaViolation(path: path, message: "the required property \"\(name)\" is missing")
            }
        }
        let closed = schema["additionalProperties"] == .bool(false)
        var seen = Set<String>()
        for (key, member) in object {
            let memberPath = SchemaPath.member(path, key)
            guard seen.insert(key).inserted else {
                return SchemaViolation(path: memberPath, message: "the property \"\(key)\" appears twice")
            }
            guard case .object(let memberSchema)? = properties[key] else {
                if closed {
                    return SchemaViolation(path: memberPath, message: "the property \"\(key)\" is not in the schema")
                }
                continue
            }
            if let problem = check(member, memberSchema, path: memberPath, chain: 0, &verdicts) { return problem }
        }
        return nil
    }

    private func checkArray(
        _ elements: [JSONValue], _ schema: JSONObject, path: String, _ verdicts: inout [Visit: SchemaViolation?]
    ) -> SchemaViolation? {
        if let minimum = schema["minItems"]?.numberValue?.intValue, elements.count < minimum {
            return SchemaViolation(path: path, message: "\(elements.count) items, fewer than minItems \(minimum)")
        }
        if let maximum = schema["maxItems"]?.numberValue?.intValue, elements.count > maximum {
            return SchemaViolation(path: path, message: "\(elements.count) items, more than maxItems \(maximum)")
        }
        guard case .object(let items)? = schema["items"] else { return nil }
        for (index, element) in elements.enumerated() {
            if let problem = check(element, items, path: SchemaPath.index(path, index), chain: 0, &verdicts) {
                return problem
            }
        }
        return nil
    }

    /// Lengths count Unicode code points, as JSON Schema does (and as a grammar's character class matches them).
    private func checkString(_ text: String, _ schema: JSONObject, path: String) -> SchemaViolation? {
        let minimum = schema["minLength"]?.numberValue?.intValue
        let maximum = schema["maxLength"]?.numberValue?.intValue
        guard minimum != nil || maximum != nil else { return nil }
        let length = text.unicodeScalars.count
        if let minimum, length < minimum {
            return SchemaViolation(path: path, message: "length \(length) is below minLength \(minimum)")
        }
        if let maximum, length > maximum {
            return SchemaViolation(path: path, message: "length \(length) is above maxLength \(maximum)")
        }
        return nil
    }

    /// Bounds compare exact decimal values (``JSONNumber/compareValue(to:)``): through a Double, 9007199254740993
    /// was not above a maximum of 9007199254740992, nor 0.10000000000000000001 above one of 0.1.
    private func checkNumber(_ number: JSONNumber, _ schema: JSONObject, path: String) -> SchemaViolation? {
        let bounds: [(key: String, fails: (Int) -> Bool, text: String)] = [
            ("minimum", { $0 < 0 }, "below minimum"), ("maximum", { $0 > 0 }, "above maximum"),
            ("exclusiveMinimum", { $0 <= 0 }, "not above exclusiveMinimum"),
            ("exclusiveMaximum", { $0 >= 0 }, "not below exclusiveMaximum"),
        ]
        for bound in bounds {
            guard let limit = schema[bound.key]?.numberValue, bound.fails(number.compareValue(to: limit)) else { continue }
            return SchemaViolation(path: path, message: "\(number.literal) is \(bound.text) \(limit.literal)")
        }
        return nil
    }

    // MARK: - Helpers

    private static func matches(_ value: JSONValue, type: JSONValue) -> Bool {
        switch type {
        case .string(let name):
            return SchemaType(rawValue: name)?.matches(value) ?? false
        case .array(let names):
            return names.contains { $0.stringValue.flatMap(SchemaType.init(rawValue:))?.matches(value) ?? false }
        default:
            return false
        }
    }

    private static func typeText(_ type: JSONValue) -> String {
        switch type {
        case .string(let name): name
        case .array(let names): names.compactMap(\.stringValue).joined(separator: " or ")
        default: type.jsonString
        }
    }

    /// JSON equality: numbers by exact decimal value (`1` equals `1.0` and `10e-1`; 9007199254740993 does not equal
    /// 9007199254740992, as it would through a Double), objects regardless of member order.
    static func equal(_ a: JSONValue, _ b: JSONValue) -> Bool {
        switch (a, b) {
        case (.number(let x), .number(let y)):
            return x.hasSameValue(as: y)
        case (.array(let x), .array(let y)):
            return x.count == y.count && zip(x, y).allSatisfy { equal($0, $1) }
        case (.object(let x), .object(let y)):
            return x.count == y.count && x.allSatisfy { member in y[member.key].map { equal(member.value, $0) } ?? false }
        default:
            return a == b
        }
    }

    /// A short rendering of a value for messages (answers can be long).
    private static func describe(_ value: JSONValue) -> String {
        let text = value.jsonString
        return text.count > 40 ? String(text.prefix(40)) + "…" : text
    }
}

/// Where and why a value does not match its schema. `path` is a JSON path into the value: `$`, `$.tags[0]`,
/// `$["a b"]`.
public struct SchemaViolation: Error, Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var message: String

    /// Creates a violation.
    public init(path: String, message: String) {
        self.path = path
        self.message = message
    }

    /// `path: message`.
    public var description: String { "\(path): \(message)" }
}
