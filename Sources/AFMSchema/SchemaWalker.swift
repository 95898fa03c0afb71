// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Validates and normalizes one schema tree, node by node, collecting warnings.
///
/// Each node goes through the same steps: refuse unknown keywords (in document order, so the first bad
/// keyword is the one reported), read `type`, check that every keyword fits the type, then rebuild the
/// node in its original key order with children normalized, unenforced keywords moved into `description`,
/// and `additionalProperties: false` (and an inferred `type`) made explicit.
struct SchemaWalker {
    let references: SchemaReferences
    let purpose: SchemaPurpose
    private(set) var warnings: [String] = []
    /// Schema nodes seen so far (properties, items, branches, definitions, the root), for ``ToolSchemaValidator/maximumNodes``.
    private(set) var nodeCount = 0

    init(references: SchemaReferences, purpose: SchemaPurpose = .toolParameters) {
        self.references = references
        self.purpose = purpose
    }

    // MARK: - Nodes

    /// Validates `value` as a schema at `path`, `depth` levels below the root, and returns it normalized.
    mutating func node(_ value: JSONValue, path: String, depth: Int, isRoot: Bool = false) throws(ToolSchemaError)
        -> JSONValue
    {
        guard depth <= ToolSchemaValidator.maximumDepth else {
            throw ToolSchemaError(
                path: path,
                message: "schemas nested more than \(ToolSchemaValidator.maximumDepth) levels deep are not supported")
        }
        nodeCount += 1
        guard nodeCount <= ToolSchemaValidator.maximumNodes else {
            throw ToolSchemaError(
                path: path,
                message: "schemas of more than \(ToolSchemaValidator.maximumNodes) nodes (properties, items, anyOf "
                    + "branches, definitions) are not supported")
        }
        guard case .object(let schema) = value else {
            throw ToolSchemaError(path: path, message: SchemaReferences.notASchema(value))
        }

        // Every keyword must be known, and root-only ones must be at the root.
        for (key, _) in schema {
            switch SchemaKeyword.classify(key) {
            case .unsupported(let hint):
                throw ToolSchemaError(path: SchemaPath.member(path, key), message: "\(key) is not supported: \(hint)")
            case .rootOnly where !isRoot:
                throw ToolSchemaError(
                    path: SchemaPath.member(path, key), message: "\(key) is only supported at the top of \(purpose.rootName)")
            default:
                continue
            }
        }
        if isRoot,
            schema.allSatisfy({ Self.isAnnotationOrRoot($0.key) && $0.key != "$defs" && $0.key != "definitions" })
        {
            guard purpose == .toolParameters else {
                throw ToolSchemaError(
                    path: path,
                    message: "an empty schema allows any JSON value, which cannot be enforced; declare a type, or ask "
                        + "for {\"type\": \"json_object\"}")
            }
            return try noArguments(schema, path: path)
        }

        let types = try declaredTypes(schema, path: path)
        let hasEnumeration = schema["enum"] != nil || schema["const"] != nil
        for combinator in ["$ref", "anyOf"] where schema[combinator] != nil {
            for (key, _) in schema where key != combinator && !Self.isAnnotationOrRoot(key) {
                throw ToolSchemaError(
                    path: SchemaPath.member(path, key),
                    message:
                        "\(key) cannot be combined with \(combinator); put it inside the referenced schema or branch")
            }
        }
        let effective = types?.base ?? inferredType(schema)
        for (key, _) in schema {
            guard case .typeSpecific(let allowed) = SchemaKeyword.classify(key) else { continue }
            guard let effective, allowed.contains(effective) else {
                let names = allowed.map { "\"\($0.rawValue)\"" }.joined(separator: " or ")
                throw ToolSchemaError(
                    path: SchemaPath.member(path, key),
                    message: effective.map { "\(key) does not apply to type \"\($0.rawValue)\"" }
                        ?? "\(key) needs \"type\": \(names)")
            }
        }
        if types == nil, effective == nil, !hasEnumeration, schema["$ref"] == nil, schema["anyOf"] == nil {
            throw ToolSchemaError(
                path: path,
                message: "a schema must declare a type (or enum, const, anyOf or $ref); untyped values are open-ended")
        }
        if isRoot, purpose == .toolParameters {
            // Arguments are always one object: no union, no null.
            let resolved = references.resolve(schema)
            let isObject =
                resolved["type"] == "object" || (resolved["type"] == nil && resolved["properties"] != nil)
            guard isObject, resolved["anyOf"] == nil else {
                throw ToolSchemaError(path: path, message: "parameters must be an object schema (\"type\": \"object\")")
            }
        }

        var output = JSONObject()
        var notes: [String] = []
        for (key, value) in schema {
            let keyPath = SchemaPath.member(path, key)
            switch key {
            case "$schema", "description", "title", "$comment", "deprecated", "readOnly", "writeOnly", "examples",
                "default":
                output[key] = try annotation(key, value, path: keyPath)
            case "type":
                output[key] = value
            case "$defs", "definitions":
                output[key] = try definitions(value, path: keyPath, depth: depth)
            case "enum":
                try checkEnum(value, types: types, path: keyPath)
                output[key] = value
            case "const":
                if let types, !types.matches(value) {
                    throw ToolSchemaError(
                        path: keyPath, message: "const \(value.jsonString) is not of type \(types.name)")
                }
                output[key] = value
            case "$ref":
                try checkReference(value, path: keyPath)
                output[key] = value
            case "anyOf":
                output[key] = try anyOf(value, path: keyPath, depth: depth)
            case "properties":
                output[key] = try properties(value, path: keyPath, depth: depth)
            case "required":
                output[key] = value  // checked against the properties below
            case "additionalProperties":
                switch value {
                case .bool, .object: break
                default: throw wrongType(keyPath, "false", value)
                }
                guard value == .bool(false) else {
                    throw ToolSchemaError(
                        path: keyPath,
                        message: "open-ended objects are not supported; declare every property and set "
                            + "additionalProperties to false (or leave it out)")
                }
                output[key] = value
            case "items":
                if case .array = value {
                    throw ToolSchemaError(
                        path: keyPath, message: "tuple items are not supported; items must be one schema")
                }
                output[key] = try node(value, path: keyPath, depth: depth + 1)
            case "minItems", "maxItems", "minLength", "maxLength":
                // Written as an integer whatever the client wrote (`3e0`, `2.0`): converters read counts as ints.
                output[key] = .number(JSONNumber(try count(value, keyPath)))
            case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum":
                guard case .number(let number) = value else { throw wrongType(keyPath, "a number", value) }
                // llama.cpp's converter reads an integer's bounds as int64_t (2^64-1 became -1, 1e300 undefined),
                // and JSON's interchangeable integers end at ±(2^53-1). (The host compares bounds exactly.)
                if types?.base == .integer, !(abs(number.doubleValue) <= Self.largestExactInteger) {
                    throw wrongType(keyPath, "a number from -9007199254740991 to 9007199254740991", value)
                }
                output[key] = value
            default:
                // Only unenforced keywords remain (everything else was refused above).
                notes.append("\(key): \(try unenforcedText(key, value, keyPath))")
                warnings.append("\(keyPath) is not enforced (kept as description)")
            }
        }

        if effective == .object {
            try checkObject(schema, path: path, hasEnumeration: hasEnumeration)
        } else if effective == .array {
            if schema["items"] == nil, !hasEnumeration {
                throw ToolSchemaError(
                    path: path, message: "arrays must declare items; an array of any values is open-ended")
            }
            try checkRange(schema, lower: "minItems", upper: "maxItems", path: path)
        } else if effective == .string {
            try checkRange(schema, lower: "minLength", upper: "maxLength", path: path)
        } else if effective == .number || effective == .integer {
            try checkNumericRange(schema, path: path)
            Self.keepTighterBounds(&output)
        }

        if types == nil, let effective {
            output["type"] = .string(effective.rawValue)
        }
        if effective == .object, output["additionalProperties"] == nil {
            output["additionalProperties"] = false
        }
        if !notes.isEmpty {
            let note = "(" + notes.joined(separator: "; ") + ")"
            let existing = output["description"]?.stringValue ?? ""
            output["description"] = .string(existing.isEmpty ? note : existing + " " + note)
        }
        return .object(output)
    }

    /// The top-level `parameters: {}` (only annotations): a function without arguments.
    private func noArguments(_ schema: JSONObject, path: String) throws(ToolSchemaError) -> JSONValue {
        var output: JSONObject = ["type": "object", "properties": [:]]
        for (key, value) in schema {
            output[key] = try annotation(key, value, path: SchemaPath.member(path, key))
        }
        output["additionalProperties"] = false
        return .object(output)
    }

    // MARK: - Keywords

    /// Checks an annotation's value; returns what to keep (`nil` for `$schema`, which describes the input's
    /// dialect, one the normalized schema no longer strictly follows).
    private func annotation(_ key: String, _ value: JSONValue, path: String) throws(ToolSchemaError) -> JSONValue? {
        switch key {
        case "$schema":
            try expectString(value, path)
            return nil
        case "description", "title", "$comment":
            try expectString(value, path)
        case "deprecated", "readOnly", "writeOnly":
            guard case .bool = value else { throw wrongType(path, "a boolean", value) }
        case "examples":
            guard case .array = value else { throw wrongType(path, "an array", value) }
        default:
            break
        }
        return value
    }

    private func declaredTypes(_ schema: JSONObject, path: String) throws(ToolSchemaError) -> SchemaTypes? {
        guard let value = schema["type"] else { return nil }
        let typePath = SchemaPath.member(path, "type")
        func parse(_ value: JSONValue) throws(ToolSchemaError) -> SchemaType {
            guard case .string(let name) = value else { throw wrongType(typePath, "a type name", value) }
            guard let type = SchemaType(rawValue: name) else {
                throw ToolSchemaError(path: typePath, message: "unknown type \"\(name)\"")
            }
            return type
        }
        switch value {
        case .string:
            return SchemaTypes(base: try parse(value), nullable: false)
        case .array(let names) where names.count == 1:
            return SchemaTypes(base: try parse(names[0]), nullable: false)
        case .array(let names) where names.count == 2:
            let first = try parse(names[0])
            let second = try parse(names[1])
            if first != second, first == .null || second == .null {
                return SchemaTypes(base: first == .null ? second : first, nullable: true)
            }
            throw ToolSchemaError(
                path: typePath,
                message: "type unions are supported only as [\"<type>\", \"null\"]; use anyOf")
        case .array:
            throw ToolSchemaError(
                path: typePath,
                message: "type unions are supported only as [\"<type>\", \"null\"]; use anyOf")
        default:
            throw wrongType(typePath, "a type name or [\"<type>\", \"null\"]", value)
        }
    }

    /// `object` when object keywords appear without a `type`, `array` for array keywords, else `nil`.
    private func inferredType(_ schema: JSONObject) -> SchemaType? {
        for type in [SchemaType.object, .array] {
            for (key, _) in schema {
                if case .typeSpecific(let allowed) = SchemaKeyword.classify(key), allowed == [type] { return type }
            }
        }
        return nil
    }

    private mutating func definitions(_ value: JSONValue, path: String, depth: Int) throws(ToolSchemaError)
        -> JSONValue
    {
        // SchemaReferences already checked that this is an object of objects.
        guard case .object(let definitions) = value else { return value }
        var output = JSONObject()
        for (name, definition) in definitions {
            output[name] = try node(definition, path: SchemaPath.member(path, name), depth: depth + 1)
        }
        return .object(output)
    }

    private func checkEnum(_ value: JSONValue, types: SchemaTypes?, path: String) throws(ToolSchemaError) {
        guard case .array(let values) = value else { throw wrongType(path, "an array", value) }
        guard !values.isEmpty else {
            throw ToolSchemaError(path: path, message: "enum must list at least one value")
        }
        if let types {
            for (index, element) in values.enumerated() where !types.matches(element) {
                throw ToolSchemaError(
                    path: SchemaPath.index(path, index),
                    message: "enum value \(element.jsonString) is not of type \(types.name)")
            }
        }
    }

    private func checkReference(_ value: JSONValue, path: String) throws(ToolSchemaError) {
        guard case .string(let reference) = value else { throw wrongType(path, "a string", value) }
        switch SchemaReferences.canonical(reference) {
        case .failure(let problem):
            throw ToolSchemaError(path: path, message: problem.message)
        case .success(let canonical):
            guard references.isDefined(canonical) else {
                throw ToolSchemaError(path: path, message: "\"\(reference)\" refers to an undefined definition")
            }
        }
    }

    private mutating func anyOf(_ value: JSONValue, path: String, depth: Int) throws(ToolSchemaError) -> JSONValue {
        guard case .array(let branches) = value else { throw wrongType(path, "an array of schemas", value) }
        guard !branches.isEmpty else {
            throw ToolSchemaError(path: path, message: "anyOf must list at least one schema")
        }
        var output: [JSONValue] = []
        for (index, branch) in branches.enumerated() {
            output.append(try node(branch, path: SchemaPath.index(path, index), depth: depth + 1))
        }
        // Branches are known to be objects now. A parser that commits to the first branch that matches (the
        // tool-call parser is a PEG) must never be able to pick the wrong one, so the branches have to be told
        // apart by what they start with: object schemas (told apart by their properties) and literals
        // (enum/const) may repeat; string, number-or-integer, boolean, array and nested unions appear once each.
        // `{"type": "null"}` branches make the union nullable.
        var seenKinds = Set<String>()
        for (index, branch) in branches.enumerated() {
            let schema = branch.objectValue ?? [:]
            guard !references.isNull(schema), let kind = unionKind(schema) else { continue }
            guard seenKinds.insert(kind).inserted else {
                throw ToolSchemaError(
                    path: SchemaPath.index(path, index),
                    message: "anyOf has two \(kind) branches, which a parser cannot tell apart; branches may be "
                        + "objects and literals (enum/const), with at most one string, number or integer, boolean, "
                        + "array and nested union, plus {\"type\": \"null\"}")
            }
        }
        return .array(output)
    }

    /// What an anyOf branch starts with, for telling branches apart: nil for kinds that may repeat (objects,
    /// literals), else `string`, `number` (integer too: `1` starts both), `boolean`, `array` or `union`.
    private func unionKind(_ schema: JSONObject) -> String? {
        if references.isObjectLike(schema) { return nil }
        let resolved = references.resolve(schema)
        if resolved["enum"] != nil || resolved["const"] != nil { return nil }
        if resolved["anyOf"] != nil { return "union" }
        var names: [String] = []
        switch resolved["type"] {
        case .string(let name)?: names = [name]
        case .array(let list)?: names = list.compactMap(\.stringValue)
        default: if resolved["items"] != nil { names = ["array"] }
        }
        switch names.first(where: { $0 != "null" }) {
        case "integer", "number": return "number"
        case let name?: return name
        case nil: return nil
        }
    }

    private mutating func properties(_ value: JSONValue, path: String, depth: Int) throws(ToolSchemaError)
        -> JSONValue
    {
        guard case .object(let properties) = value else { throw wrongType(path, "an object of schemas", value) }
        var output = JSONObject()
        for (name, schema) in properties {
            output[name] = try node(schema, path: SchemaPath.member(path, name), depth: depth + 1)
        }
        return .object(output)
    }

    /// An object declares its properties (or is fully fixed by enum/const), and `required` names them.
    private func checkObject(_ schema: JSONObject, path: String, hasEnumeration: Bool) throws(ToolSchemaError) {
        guard case .object(let properties) = schema["properties"] ?? .null else {
            if hasEnumeration { return }
            throw ToolSchemaError(
                path: path,
                message: "open-ended objects are not supported; declare properties (an empty object is "
                    + "\"properties\": {})")
        }
        guard let required = schema["required"] else { return }
        let requiredPath = SchemaPath.member(path, "required")
        guard case .array(let names) = required else {
            throw wrongType(requiredPath, "an array of property names", required)
        }
        var seen = Set<String>()
        for (index, name) in names.enumerated() {
            let elementPath = SchemaPath.index(requiredPath, index)
            guard case .string(let name) = name else { throw wrongType(elementPath, "a property name", name) }
            guard properties.contains(key: name) else {
                throw ToolSchemaError(
                    path: elementPath, message: "required property \"\(name)\" is not declared in properties")
            }
            guard seen.insert(name).inserted else {
                throw ToolSchemaError(path: elementPath, message: "\"\(name)\" is listed twice in required")
            }
        }
    }

    /// `lower` ≤ `upper` for two count keywords (already checked to be counts).
    private func checkRange(_ schema: JSONObject, lower: String, upper: String, path: String) throws(ToolSchemaError) {
        guard let low = schema[lower]?.numberValue.flatMap(Self.wholeValue),
            let high = schema[upper]?.numberValue.flatMap(Self.wholeValue)
        else {
            return
        }
        guard low <= high else {
            throw ToolSchemaError(
                path: SchemaPath.member(path, upper), message: "\(upper) (\(high)) is less than \(lower) (\(low))")
        }
    }

    /// The numeric bounds leave at least one number.
    /// Compares exact values (``JSONNumber/compareValue(to:)``), as the check of answers does.
    private func checkNumericRange(_ schema: JSONObject, path: String) throws(ToolSchemaError) {
        let lowers = [("minimum", false), ("exclusiveMinimum", true)].compactMap { key, exclusive in
            schema[key]?.numberValue.map { (key: key, value: $0, exclusive: exclusive) }
        }
        let uppers = [("maximum", false), ("exclusiveMaximum", true)].compactMap { key, exclusive in
            schema[key]?.numberValue.map { (key: key, value: $0, exclusive: exclusive) }
        }
        for low in lowers {
            for high in uppers {
                let order = low.value.compareValue(to: high.value)
                let empty = low.exclusive || high.exclusive ? order >= 0 : order > 0
                if empty {
                    throw ToolSchemaError(
                        path: SchemaPath.member(path, high.key),
                        message: "\(high.key) (\(schema[high.key]?.jsonString ?? "")) leaves no value above "
                            + "\(low.key) (\(schema[low.key]?.jsonString ?? ""))")
                }
            }
        }
    }

    /// The largest integer a Double holds exactly, 2^53-1 (JSON's "safe" integer).
    private static let largestExactInteger = 9_007_199_254_740_991.0

    /// Of two bounds on one side (`minimum` and `exclusiveMinimum`, `maximum` and `exclusiveMaximum`) keeps the
    /// tighter one: the values allowed are the same, and llama.cpp's converter reads only `minimum`/`maximum` when
    /// both are there (`minimum: 0, exclusiveMinimum: 5` let the grammar write 1, which the host then refused).
    /// Bounds compare exact values (``JSONNumber/compareValue(to:)``): two bounds equal as Doubles
    /// (`minimum: 0.10000000000000000001`, `exclusiveMinimum: 0.1`) are not equal.
    private static func keepTighterBounds(_ output: inout JSONObject) {
        for (inclusive, exclusive, exclusiveIsTighter) in [
            ("minimum", "exclusiveMinimum", { (order: Int) in order >= 0 }),
            ("maximum", "exclusiveMaximum", { (order: Int) in order <= 0 }),
        ] {
            guard let i = output[inclusive]?.numberValue, let e = output[exclusive]?.numberValue else { continue }
            _ = output.removeValue(forKey: exclusiveIsTighter(e.compareValue(to: i)) ? inclusive : exclusive)
        }
    }

    /// The description text for an unenforced keyword, after checking its value's type.
    private func unenforcedText(_ key: String, _ value: JSONValue, _ path: String) throws(ToolSchemaError) -> String {
        switch key {
        case "pattern", "format", "contentEncoding", "contentMediaType":
            try expectString(value, path)
        case "minProperties", "maxProperties":
            _ = try count(value, path)
        case "multipleOf":
            guard case .number(let number) = value, number.doubleValue > 0 else {
                throw wrongType(path, "a number greater than 0", value)
            }
        case "uniqueItems":
            guard case .bool = value else { throw wrongType(path, "a boolean", value) }
        default:
            break
        }
        return value.stringValue ?? value.jsonString
    }

    // MARK: - Helpers

    private func expectString(_ value: JSONValue, _ path: String) throws(ToolSchemaError) {
        guard case .string = value else { throw wrongType(path, "a string", value) }
    }

    /// A non-negative whole number (`3`, also `3e0` and `3.0`; not `3.5` or `-1`) that fits a C `int`: llama.cpp's
    /// converter reads counts as one, and 4294967296 became 0 there (a minLength the grammar never wrote, an answer
    /// the host then refused).
    private func count(_ value: JSONValue, _ path: String) throws(ToolSchemaError) -> Int {
        guard case .number(let number) = value, let count = Self.wholeValue(number), count >= 0,
            count <= Int(Int32.max)
        else {
            throw wrongType(path, "a non-negative integer no larger than 2147483647", value)
        }
        return count
    }

    /// The integer a number stands for when it has one exactly: `3`, `3e0`, `30e-1`, `3.0`, `3.00`, `3.0e0` (a
    /// fraction of zeros is dropped from the text, never read through a Double); nil for `3.5` or `2.5e1`.
    static func wholeValue(_ number: JSONNumber) -> Int? {
        if let value = number.intValue { return value }
        let text = number.literal
        guard let dot = text.firstIndex(of: ".") else { return nil }
        let fractionEnd = text[dot...].firstIndex { $0 == "e" || $0 == "E" } ?? text.endIndex
        guard text[text.index(after: dot)..<fractionEnd].allSatisfy({ $0 == "0" }),
            let whole = JSONNumber(literal: String(text[..<dot] + text[fractionEnd...]))
        else { return nil }
        return whole.intValue
    }

    private func wrongType(_ path: String, _ expected: String, _ value: JSONValue) -> ToolSchemaError {
        let shown = value.jsonString
        let excerpt = shown.count > 40 ? String(shown.prefix(40)) + "…" : shown
        return ToolSchemaError(path: path, message: "must be \(expected), not \(excerpt)")
    }

    private static func isAnnotationOrRoot(_ key: String) -> Bool {
        switch SchemaKeyword.classify(key) {
        case .annotation, .rootOnly: true
        default: false
        }
    }
}
