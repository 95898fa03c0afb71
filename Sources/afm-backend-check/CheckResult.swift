// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The outcome of one check: whether it passed and what it saw.
struct CheckResult: Sendable {
    var name: String
    var passed: Bool
    var detail: String
    var seconds: Double

    /// The check's entry of `--json`.
    var json: JSONValue {
        .object(
            JSONObject([
                ("name", .string(name)), ("passed", .bool(passed)), ("detail", .string(detail)),
                ("seconds", .number(JSONNumber((seconds * 1000).rounded() / 1000))),
            ]))
    }

    /// One line of the text report: `PASS name  detail`.
    var line: String {
        (passed ? "PASS  " : "FAIL  ") + name.padding(toLength: 18, withPad: " ", startingAt: 0) + " " + detail
    }
}
