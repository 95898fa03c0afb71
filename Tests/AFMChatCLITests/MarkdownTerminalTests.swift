// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMTestSupport
import Foundation
import Testing

/// Markdown answers in a real pseudo-terminal (tmux): tables aligned in box-drawing lines that fit the terminal's
/// width (also after it changes), lists, quotes, links and fenced code; `NO_COLOR` keeps the layout without escapes.
@Suite(.serialized) struct MarkdownTerminalTests {
    static let answer = """
        Here are the planets:

        | Planet | Moons | Note |
        |:-------|------:|------|
        | Mercury | 0 | closest to the Sun, and the smallest planet of the solar system by far |
        | Jupiter | 95 | **largest** |

        - first point
        - second point that is long enough to wrap around when the terminal is narrow enough for it
        > a quoted line
        See [the docs](https://example.org/docs).
        ```python
        print("hi")
        ```
        done
        """

    static var model: String {
        let text = answer.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
        return #"{"capabilities":{"streaming":true,"tools":false,"vision":false,"reasoning":false},"steps":[{"text":"\#(text)"}]}"#
    }

    /// The table's lines on screen: from its top border to its bottom one.
    private func tableLines(_ lines: [String]) -> [String] {
        guard let top = lines.firstIndex(where: { $0.hasPrefix("┌") }), let bottom = lines[top...].firstIndex(where: { $0.hasPrefix("└") })
        else { return [] }
        return Array(lines[top...bottom])
    }

    @Test func tablesFitTheWidthAndFollowItsChanges() throws {
        let harness = try ChatHarness(models: ["m": Self.model])
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory], width: 70, height: 60)
        #expect(pane.waitFor("/help for commands"))
        try pane.line("planets?")
        #expect(pane.waitFor("done\n"))
        var lines = pane.visibleLines()
        var table = tableLines(lines)
        #expect(table.count >= 6, "\(lines.joined(separator: "\n"))")
        // Every table line is as wide as the others and fits in 70 columns; the column bars line up.
        let widths = Set(table.map { TerminalColumns.width(of: $0) })
        #expect(widths.count == 1 && widths.first! <= 70, "\(table)")
        let bars = table.filter { $0.hasPrefix("│") }.map { line in line.indices.filter { line[$0] == "│" }.map { line.distance(from: line.startIndex, to: $0) } }
        #expect(Set(bars).count == 1, "\(table)")
        #expect(table.contains { $0.contains("Mercury") && $0.contains("│     0 │") })  // right-aligned numbers
        #expect(lines.contains { $0.contains("• first point") })
        #expect(lines.contains { $0.hasPrefix("│ a quoted line") })
        #expect(lines.contains { $0.contains("the docs (https://example.org/docs)") })
        #expect(lines.contains { $0.hasPrefix("── python ") })
        #expect(lines.contains { $0 == "  print(\"hi\")" })
        #expect(!lines.contains { $0.contains("|:---") || $0.contains("```") })

        // Narrower: the next answer's table and paragraphs fit 44 columns.
        try pane.resize(width: 44, height: 60)
        try pane.press("C-l")
        #expect(waitUntil(seconds: 10) { !pane.visibleLines().contains("done") })
        try pane.line("again?")
        #expect(waitUntil(seconds: 15) { pane.visibleLines().contains("done") })
        lines = pane.visibleLines()
        table = tableLines(lines)
        #expect(table.count >= 6)
        #expect(lines.allSatisfy { TerminalColumns.width(of: $0) <= 44 }, "\(lines.joined(separator: "\n"))")
        #expect(lines.contains { $0.hasPrefix("  ") && $0.contains("narrow") }, "list items wrap under their text: \(lines.joined(separator: "\n"))")
    }

    @Test func noColorKeepsTheLayoutWithoutEscapes() throws {
        let harness = try ChatHarness(models: ["m": Self.model])
        let pane = try TmuxPane(
            command: ["env", "NO_COLOR=1", ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory], width: 80, height: 60)
        #expect(pane.waitFor("/help for commands"))
        try pane.line("planets?")
        #expect(pane.waitFor("done\n"))
        #expect(tableLines(pane.visibleLines()).count >= 6)
        let styled = pane.styledScreen()
        #expect(!styled.contains("\u{1B}["), "styling escapes with NO_COLOR: \(styled.debugDescription)")
    }
}
