// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSchema
import Testing

/// The path every table case is validated under.
let root = "tools[0].parameters"

/// Parses JSON text written in a test; a typo in a fixture is a test bug, so it traps with the text.
func json(_ text: String) -> JSONValue {
    do {
        return try JSONParser.parse(text)
    } catch {
        fatalError("fixture is not JSON (\(error)): \(text)")
    }
}

/// Validates and returns the error, or `nil` when the schema was accepted.
func schemaError(_ schema: JSONValue, path: String = root) -> ToolSchemaError? {
    do {
        _ = try ToolSchemaValidator.validate(schema, path: path)
        return nil
    } catch {
        return error
    }
}

/// A schema that must be accepted; optionally its exact normalized form and number of warnings.
struct AcceptedCase: Sendable, CustomTestStringConvertible {
    let name: String
    let schema: String
    let normalized: String?
    let warnings: Int

    init(_ name: String, _ schema: String, normalized: String? = nil, warnings: Int = 0) {
        self.name = name
        self.schema = schema
        self.normalized = normalized
        self.warnings = warnings
    }

    var testDescription: String { name }
}

/// A schema that must be refused at `path` (relative to ``root``; empty means the root itself), with a
/// message containing `fragment`.
struct RejectedCase: Sendable, CustomTestStringConvertible {
    let name: String
    let schema: String
    let path: String
    let fragment: String

    init(_ name: String, _ schema: String, at path: String, _ fragment: String = "") {
        self.name = name
        self.schema = schema
        self.path = path
        self.fragment = fragment
    }

    var fullPath: String { path.isEmpty ? root : root + "." + path }
    var testDescription: String { name }
}
