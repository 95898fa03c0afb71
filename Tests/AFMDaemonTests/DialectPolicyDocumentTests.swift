// SPDX-License-Identifier: Apache-2.0
import AFMDialects
import AFMResponses
import AFMTestSupport
import Foundation
import Testing

/// Each dialect's documentation page (docs/responses-api.md, docs/chat-completions.md, docs/anthropic-messages.md) lists exactly the fields of its policy table, with the same dispositions.
@Suite struct DialectPolicyDocumentTests {
    static func rows(_ page: String) throws -> [String: String] {
        let text = try String(contentsOfFile: TestPaths.root + "/docs/" + page, encoding: .utf8)
        let start = try #require(text.range(of: "<!-- policy-table"))
        let end = try #require(text.range(of: "<!-- end policy-table -->"))
        var rows: [String: String] = [:]
        for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            rows[cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[2]
        }
        return rows
    }

    static func expected(_ disposition: PolicyTable.Disposition) -> String {
        switch disposition {
        case .supported: "supported"
        case .ignored: "ignored"
        case .rejected(let code, _): "rejected: `\(code)`"
        }
    }

    @Test(arguments: [
        ("responses-api.md", RequestPolicy.table), ("chat-completions.md", ChatCompletionsRequest.policy),
        ("anthropic-messages.md", MessagesRequest.policy),
    ])
    func theDocumentMatchesThePolicyTable(_ page: String, _ table: PolicyTable) throws {
        let rows = try Self.rows(page)
        #expect(Set(rows.keys) == Set(table.fields.map(\.name)), "docs/\(page)")
        for field in table.fields {
            #expect(rows[field.name] == Self.expected(field.disposition), "docs/\(page) row for \(field.name)")
        }
    }
}
