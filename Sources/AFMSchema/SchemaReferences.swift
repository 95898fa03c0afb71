// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The definitions a schema's `$ref`s can point to, and the checks that need all of them at once.
///
/// Supported references are local: `#` (the whole `parameters` schema), `#/$defs/<name>` and
/// `#/definitions/<name>` (JSON Pointer escapes `~0` and `~1` decoded). Recursion through an object or array
/// is fine — a grammar can recurse — but a cycle that passes only through `$ref` and `anyOf` (`A → B → A`)
/// describes no value at all and would send a grammar builder into an endless loop, so it is refused.
///
/// ``analyze()`` walks the graph of such "unguarded" references once, iteratively, and remembers for each
/// definition what a chain of references ends in and whether it is an object schema. Later questions
/// are then answered from those tables, so a hostile schema (thousands of chained definitions, unions of
/// references to unions) costs linear time and no deep recursion.
struct SchemaReferences {
    /// One referable schema and where it is.
    struct Target {
        var schema: JSONObject
        var path: String
    }

    /// Why a reference string is not supported; the caller knows the path.
    struct Problem: Error {
        var message: String
    }

    /// An unguarded reference: its canonical target and the path of the `$ref` keyword.
    private typealias Edge = (target: String, path: String)

    /// Targets by canonical reference (`#`, `#/$defs/<name>`, `#/definitions/<name>`, names decoded).
    private var targets: [String: Target] = [:]
    /// For each target, the target its chain of `$ref`s ends at (itself when it is not a reference).
    private var chainEnd: [String: String] = [:]
    /// For each target, whether it is an object schema, or a union of object schemas (and null).
    private var objectLike: [String: Bool] = [:]

    /// Collects the root and its definitions.
    ///
    /// - Throws: when `$defs` or `definitions` is not an object of schema objects.
    init(root: JSONObject, rootPath: String) throws(ToolSchemaError) {
        targets["#"] = Target(schema: root, path: rootPath)
        for container in ["$defs", "definitions"] {
            guard let value = root[container] else { continue }
            let containerPath = SchemaPath.member(rootPath, container)
            guard case .object(let definitions) = value else {
                throw ToolSchemaError(
                    path: containerPath,
                    message: "\(container) must be an object of named schemas, not \(value.typeName)")
            }
            for (name, definition) in definitions {
                let path = SchemaPath.member(containerPath, name)
                guard case .object(let schema) = definition else {
                    throw ToolSchemaError(path: path, message: SchemaReferences.notASchema(definition))
                }
                targets["#/\(container)/\(name)"] = Target(schema: schema, path: path)
            }
        }
    }

    // MARK: - Reference strings

    /// The canonical form of a supported reference string, or why it is not supported.
    static func canonical(_ reference: String) -> Result<String, Problem> {
        let fail = { (message: String) in Result<String, Problem>.failure(Problem(message: message)) }
        if reference == "#" { return .success("#") }
        guard reference.hasPrefix("#") else {
            return fail("only local references are supported (#/$defs/<name>), not \"\(reference)\"")
        }
        for container in ["$defs", "definitions"] {
            let prefix = "#/\(container)/"
            guard reference.hasPrefix(prefix) else { continue }
            let token = reference.dropFirst(prefix.count)
            guard !token.contains("/") else {
                return fail("references into a definition are not supported; use #/\(container)/<name>")
            }
            guard let name = decodePointerToken(token) else {
                return fail("\"\(reference)\" is not a valid JSON Pointer (a '~' must be followed by 0 or 1)")
            }
            return .success(prefix + name)
        }
        return fail("unsupported reference \"\(reference)\"; use #/$defs/<name>")
    }

    /// Whether a canonical reference names a definition.
    func isDefined(_ canonical: String) -> Bool {
        targets[canonical] != nil
    }

    /// The canonical target of a schema's `$ref`, when it has a supported reference to a defined target.
    private func referenced(_ schema: JSONObject) -> String? {
        guard case .string(let reference) = schema["$ref"] ?? .null,
            case .success(let canonical) = SchemaReferences.canonical(reference), targets[canonical] != nil
        else { return nil }
        return canonical
    }

    // MARK: - Analysis

    /// Refuses reference cycles with no object or array between two visits of a definition, and fills the
    /// tables behind ``resolve(_:)`` and ``isObjectLike(_:)``.
    ///
    /// An iterative depth-first search: a hostile schema may chain thousands of definitions, and the
    /// search must not grow the thread's stack with them. A target is finished only after everything it
    /// references unguarded is finished, so its table entries can be computed from theirs.
    mutating func analyze() throws(ToolSchemaError) {
        enum Mark { case visiting, done }
        struct Frame {
            var name: String
            var edges: [Edge]
            var next = 0
        }
        var marks: [String: Mark] = [:]
        // Sorted, so the reported cycle does not depend on dictionary order.
        for start in targets.keys.sorted() where marks[start] == nil {
            var stack: [Frame] = []
            // Only names present in `targets` are pushed: `start`, and edges, which are to defined targets.
            marks[start] = .visiting
            stack.append(Frame(name: start, edges: unguardedReferences(targets[start]!)))
            while let top = stack.last {
                guard top.next < top.edges.count else {
                    finish(top.name)
                    marks[top.name] = .done
                    stack.removeLast()
                    continue
                }
                let edge = top.edges[top.next]
                stack[stack.count - 1].next += 1
                switch marks[edge.target] {
                case .visiting:
                    let names = stack.map(\.name)
                    let first = names.firstIndex(of: edge.target) ?? 0
                    let cycle = (names[first...] + [edge.target]).joined(separator: " → ")
                    throw ToolSchemaError(
                        path: edge.path,
                        message: "reference cycle with no object or array in between (\(cycle)) describes no value")
                case .done:
                    continue
                case nil:
                    marks[edge.target] = .visiting
                    stack.append(Frame(name: edge.target, edges: unguardedReferences(targets[edge.target]!)))
                }
            }
        }
    }

    /// Fills the tables for a target whose unguarded references are all finished.
    private mutating func finish(_ name: String) {
        // Called only for names in `targets`.
        let schema = targets[name]!.schema
        chainEnd[name] = referenced(schema).flatMap { chainEnd[$0] } ?? name
        objectLike[name] = isObjectLike(schema)
    }

    /// The references a target reaches without consuming any input: its own `$ref` and those of its
    /// `anyOf` branches, recursively. References under `properties` or `items` are guarded by `{` or `[`.
    private func unguardedReferences(_ target: Target) -> [Edge] {
        var edges: [Edge] = []
        // Inline unions nest at most as deep as the walk allows; deeper input is refused by the walk.
        var pending: [(schema: JSONObject, path: String, depth: Int)] = [(target.schema, target.path, 0)]
        while let (schema, path, depth) = pending.popLast() {
            if let canonical = referenced(schema) {
                edges.append((canonical, SchemaPath.member(path, "$ref")))
            }
            guard depth < ToolSchemaValidator.maximumDepth, case .array(let branches) = schema["anyOf"] ?? .null
            else { continue }
            let anyOfPath = SchemaPath.member(path, "anyOf")
            for (index, branch) in branches.enumerated().reversed() {
                guard case .object(let branch) = branch else { continue }
                pending.append((branch, SchemaPath.index(anyOfPath, index), depth + 1))
            }
        }
        return edges
    }

    // MARK: - Questions (after analyze)

    /// The schema a chain of `$ref`s starting at `schema` ends at (`schema` itself when it is not a
    /// reference, or its reference is undefined or unsupported, which the walk reports).
    func resolve(_ schema: JSONObject) -> JSONObject {
        guard let canonical = referenced(schema), let end = chainEnd[canonical], let target = targets[end] else {
            return schema
        }
        return target.schema
    }

    /// Whether `schema` is `{"type": "null"}` (plus annotations), after following references.
    func isNull(_ schema: JSONObject) -> Bool {
        let resolved = resolve(schema)
        return resolved["type"] == "null" || resolved["type"] == ["null"]
    }

    /// Whether `schema` is an object schema after following references, or a union of such schemas (with
    /// optional null branches).
    func isObjectLike(_ schema: JSONObject, depth: Int = 0) -> Bool {
        if let canonical = referenced(schema) {
            return objectLike[canonical] ?? false
        }
        if case .array(let branches) = schema["anyOf"] ?? .null {
            guard depth < ToolSchemaValidator.maximumDepth else { return false }
            let nonNull = branches.compactMap(\.objectValue).filter { !isNull($0) }
            return !nonNull.isEmpty && nonNull.allSatisfy { isObjectLike($0, depth: depth + 1) }
        }
        switch schema["type"] {
        case .string("object"): return true
        case .array(let names): return names.contains("object")
        case nil: return schema["properties"] != nil
        default: return false
        }
    }

    // MARK: - Helpers

    /// Decodes `~1` → `/` and `~0` → `~`; `nil` for any other `~` sequence.
    private static func decodePointerToken(_ token: Substring) -> String? {
        var result = ""
        var iterator = token.makeIterator()
        while let character = iterator.next() {
            guard character == "~" else {
                result.append(character)
                continue
            }
            switch iterator.next() {
            case "0": result.append("~")
            case "1": result.append("/")
            default: return nil
            }
        }
        return result
    }

    /// The message for a value where a schema object belongs.
    static func notASchema(_ value: JSONValue) -> String {
        if case .bool = value {
            return "boolean schemas (true/false) are not supported; write an object schema"
        }
        return "a schema must be a JSON object, not \(value.typeName)"
    }
}
