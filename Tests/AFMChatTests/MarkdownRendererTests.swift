// SPDX-License-Identifier: Apache-2.0
import AFMChat
import Testing

/// The terminal's Markdown layout without a terminal: `colors: false` (as with NO_COLOR) gives plain text to compare.
@Suite struct MarkdownRendererTests {
    private func render(_ text: String, columns: Int = 60, colors: Bool = false, pieceSize: Int = 1) -> String {
        var renderer = MarkdownRenderer(formatting: true, colors: colors) { columns }
        var output = ""
        var rest = Substring(text)
        while !rest.isEmpty {
            output += renderer.feed(String(rest.prefix(pieceSize)))
            rest = rest.dropFirst(pieceSize)
        }
        return output + renderer.finish()
    }

    @Test func tablesAreAlignedAndNarrowedToTheWidth() {
        let table = "| a | long header |\n|---|:---:|\n| 1 | x |\n| 22 | yy |\n"
        #expect(render(table) == """
            ┌────┬─────────────┐
            │ a  │ long header │
            ├────┼─────────────┤
            │ 1  │      x      │
            │ 22 │     yy      │
            └────┴─────────────┘

            """)
        // At 20 columns the long cell wraps inside its column.
        let narrow = render("| name | text |\n|---|---|\n| n | one two three four five six |\n", columns: 20)
        let lines = narrow.split(separator: "\n")
        #expect(lines.allSatisfy { TerminalColumns.width(of: $0) <= 20 }, "\(narrow)")
        #expect(lines.count > 6, "\(narrow)")
    }

    @Test func listsQuotesLinksRulesAndFencesAreLaidOut() {
        let text = "- one\n1. first\n> quoted\nsee [docs](https://e.org/d) now\n---\n```swift\nlet x = 1\n```\nend"
        #expect(render(text, columns: 30) == """
            • one
            1. first
            │ quoted
            see docs (https://e.org/d) now
            ──────────────────────────────
            ── swift ─────────────────────
              let x = 1
            ──────────────────────────────
            end
            """)
    }

    @Test func paragraphsWrapAtWordsWithHangingIndents() {
        #expect(render("- alpha beta gamma delta epsilon", columns: 16) == "• alpha beta\n  gamma delta\n  epsilon")
        // Streaming in pieces of any size gives the same text.
        let text = "# Title\nsome **bold** and `code` with a [link](http://x.y) in it\n| a | b |\n|---|---|\n| 1 | 2 |\nafter"
        let whole = render(text, colors: true, pieceSize: 1000)
        for size in [1, 2, 3, 7] { #expect(render(text, colors: true, pieceSize: size) == whole, "pieces of \(size)") }
        #expect(whole.contains("\u{1B}[1mbold\u{1B}[22m") && whole.contains("\u{1B}[36mcode\u{1B}[39m"))
    }

    @Test func withoutFormattingTheTextPassesThrough() {
        var renderer = MarkdownRenderer(formatting: false, colors: false)
        let text = "| a | b |\n|---|---|\n**x**"
        #expect(renderer.feed(text) + renderer.finish() == text)
    }
}
