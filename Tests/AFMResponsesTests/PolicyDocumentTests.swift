// SPDX-License-Identifier: Apache-2.0
import AFMResponses
import AFMTestSupport
import Foundation
import Testing

/// docs/responses-api.md must list exactly the fields of RequestPolicy, with the same dispositions.
@Suite struct PolicyDocumentTests {
    static func documentRows() throws -> [String: String] {
        let text = try String(contentsOfFile: TestPaths.root + "/docs/responses-api.md", encoding: .utf8)
        let start = try #require(text.range(of: "<!-- policy-table"))
        let end = try #require(text.range(of: "<!-- end policy-table -->"))
        var rows: [String: String] = [:]
        for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            rows[cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))] = cells[2]
        }
        return rows
    }

    static func expected(_ disposition: RequestPolicy.Disposition) -> String {
        switch disposition {
        case .supported: "supported"
        case .ignored: "ignored"
        case .rejected(let code, _): "rejected: `\(code)`"
        }
    }

    @Test func theDocumentMatchesThePolicyTable() throws {
        let rows = try Self.documentRows()
        #expect(Set(rows.keys) == Set(RequestPolicy.fields.map(\.name)))
        for field in RequestPolicy.fields {
            #expect(rows[field.name] == Self.expected(field.disposition), "docs/responses-api.md row for \(field.name)")
        }
    }
}
