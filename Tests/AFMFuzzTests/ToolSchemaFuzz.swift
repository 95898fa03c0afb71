// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSchema

/// The tool-parameter schema walker and validator.
///
/// Property: a schema it accepts is normalized to a fixed point (validating the normalized schema accepts it and
/// normalizes it to itself); rejections carry a path.
enum ToolSchemaFuzz {
    static func run(_ bytes: [UInt8]) throws {
        guard let schema = try? JSONParser.parse(bytes) else { return }
        let report: ToolSchemaReport
        do {
            report = try ToolSchemaValidator.validate(schema, path: "tools[0].parameters")
        } catch {
            try check(error.path.hasPrefix("tools[0].parameters"), "a rejection's path does not start at the schema: \(error)")
            return
        }
        let again: ToolSchemaReport
        do {
            again = try ToolSchemaValidator.validate(report.normalized, path: "tools[0].parameters")
        } catch {
            throw PropertyViolation(description: "the normalized schema is rejected: \(error)\n\(report.normalized)")
        }
        try check(again.normalized == report.normalized, "normalizing is not idempotent:\n\(report.normalized)\n\(again.normalized)")
    }
}
