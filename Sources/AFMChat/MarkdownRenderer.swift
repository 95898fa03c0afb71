// SPDX-License-Identifier: Apache-2.0

/// Renders Markdown for a terminal as it streams in.
///
/// | Markdown                      | on the terminal                                                      |
/// |-------------------------------|----------------------------------------------------------------------|
/// | paragraphs                    | words wrapped at the terminal's width (read at every line, so a      |
/// |                               | resized terminal gets the new width from the next line on)          |
/// | `# heading`                   | bold (underlined for level 1)                                        |
/// | `**bold**`, `*italic*`        | bold, italic                                                         |
/// | `` `code` ``                  | in colour                                                            |
/// | `[text](url)`                 | underlined text, then the address dimmed                             |
/// | `- item`, `1. item`           | `•` / the number, wrapped lines indented under the text             |
/// | `> quote`                     | a `│` bar before every line                                          |
/// | fenced code (```` ```lang ````) | set apart by rules naming the language, indented, in colour, never wrapped |
/// | tables                        | columns aligned in box-drawing lines, narrowed (cells wrapped) to fit |
/// | `---`                         | a horizontal rule                                                    |
///
/// Feed text in arbitrary pieces: paragraph text appears word by word; a line start is held until it shows
/// what the line is (a fence, a heading, a list, a table row), a link until it is complete, and a table until
/// its last row (all its widths must be known).
///
/// `formatting: false` (output is not a terminal) passes the text through unchanged: Markdown is readable as it
/// is, and a script gets the model's exact text. `colors: false` (`NO_COLOR`) lays out the same way with no
/// escape sequences at all.
///
/// The text fed in must be neutralized already (no control characters but line feeds and tabs): the renderer
/// adds its own SGR sequences only.
public struct MarkdownRenderer: Sendable {
    /// ANSI SGR sequences used.
    enum Style {
        static let reset = "\u{1B}[0m"
        static let bold = "\u{1B}[1m"
        static let boldOff = "\u{1B}[22m"
        static let italic = "\u{1B}[3m"
        static let italicOff = "\u{1B}[23m"
        static let underline = "\u{1B}[4m"
        static let underlineOff = "\u{1B}[24m"
        static let code = "\u{1B}[36m"
        static let colorOff = "\u{1B}[39m"
        static let dim = "\u{1B}[2m"
        static let block = "\u{1B}[33m"
    }

    /// What the current line is.
    private enum Line: Equatable {
        /// Not decided yet: the characters seen so far.
        case start
        /// Paragraph, heading, list item or quote text, rendered inline as it arrives.
        case inline
        /// A line kept whole until its end (a table row, a fence, a rule candidate).
        case whole
        /// A line inside a fenced block.
        case code
    }

    public let formatting: Bool
    public let colors: Bool
    private let columns: @Sendable () -> Int
    private var line = Line.start
    private var held = ""
    private var inFence = false
    private var fenceMarker = ""
    private var tableRows: [String] = []
    private var width = 80
    // Inline state.
    private var bold = false
    private var italic = false
    private var inlineCode = false
    private var pendingMarker = ""
    private var link: String?
    private var lineStyle = ""
    // Word wrapping.
    private var column = 0
    private var word = ""
    private var wordWidth = 0
    private var pendingSpace = false
    private var hangingIndent = ""

    /// - Parameters:
    ///   - formatting: lay Markdown out (a terminal); false passes text through.
    ///   - colors: use SGR styling (false for `NO_COLOR`).
    ///   - columns: the terminal's width, read at the start of every line.
    public init(formatting: Bool, colors: Bool, columns: @escaping @Sendable () -> Int = { 80 }) {
        self.formatting = formatting
        self.colors = formatting && colors
        self.columns = columns
    }

    /// Formatting and colours together (a terminal without `NO_COLOR`), or neither.
    public init(colors: Bool) {
        self.init(formatting: colors, colors: colors)
    }

    /// Renders the next piece of text.
    public mutating func feed(_ text: String) -> String {
        guard formatting else { return text }
        var output = ""
        for character in text { consume(character, into: &output) }
        return output
    }

    /// Flushes what was held back (a line start, a link, a table) and resets styles.
    public mutating func finish() -> String {
        guard formatting else { return "" }
        var output = ""
        switch line {
        case .start, .whole:
            if !held.isEmpty { finishLine(held, into: &output, ended: false) }
        case .inline:
            flushLink(into: &output)
            flushMarker(into: &output)
            flushWord(into: &output)
        case .code:
            output += held
        }
        if !tableRows.isEmpty { output += renderTable() }
        if colors && (bold || italic || inlineCode || !lineStyle.isEmpty || inFence) { output += Style.reset }
        self = MarkdownRenderer(formatting: formatting, colors: colors, columns: columns)
        return output
    }

    private func styled(_ sgr: String) -> String { colors ? sgr : "" }

    // MARK: - Lines

    private mutating func consume(_ character: Character, into output: inout String) {
        switch line {
        case .start:
            if character == "\n" {
                finishLine(held, into: &output, ended: true)
                return
            }
            held.append(character)
            decideLine(into: &output)
        case .whole:
            if character == "\n" {
                finishLine(held, into: &output, ended: true)
            } else {
                held.append(character)
            }
        case .code:
            if character == "\n" {
                output += held + styled(Style.colorOff) + "\n"
                held = ""
                line = .start
            } else {
                held.append(character)
            }
        case .inline:
            if character == "\n" {
                endInlineLine(into: &output)
                output += "\n"
                line = .start
            } else {
                inline(character, into: &output)
            }
        }
    }

    /// Decides what a line is once its start shows it; until then it stays held.
    private mutating func decideLine(into output: inout String) {
        let trimmed = held.drop { $0 == " " }
        guard let first = trimmed.first else { return }
        if inFence {
            let marker = fenceMarker
            if marker.hasPrefix(trimmed) || trimmed.hasPrefix(marker) {
                if trimmed.count >= marker.count { line = .whole }
                return
            }
            if !tableRows.isEmpty { output += renderTable() }
            line = .code
            held = styled(Style.block) + "  " + held
            return
        }
        // A table ends at the first line that is not a row.
        if first != "|" && !tableRows.isEmpty { output += renderTable() }
        switch first {
        case "|":
            line = .whole
        case "`", "~":
            let marker = String(repeating: first, count: 3)
            if marker.hasPrefix(trimmed) { return }
            if trimmed.hasPrefix(marker) { line = .whole } else { beginInline(into: &output) }
        case "#":
            if trimmed.allSatisfy({ $0 == "#" }) { return }
            beginInline(into: &output)
        case "-", "*", "_", "+":
            // A bullet (`- `), a rule (`---`, held to the line's end) or text that starts with the character.
            guard let second = trimmed.dropFirst().first else { return }
            if second == first && trimmed.allSatisfy({ $0 == first || $0 == " " }) { return }
            beginInline(into: &output)
        case "0"..."9":
            if trimmed.allSatisfy({ $0.isNumber }) && trimmed.count < 10 { return }
            if let last = trimmed.last, last == "." || last == ")", trimmed.dropLast().allSatisfy({ $0.isNumber }) { return }
            beginInline(into: &output)
        case ">":
            if trimmed.count == 1 { return }
            beginInline(into: &output)
        default:
            beginInline(into: &output)
        }
    }

    /// A whole held line ended (or the text ended while it was held).
    private mutating func finishLine(_ text: String, into output: inout String, ended: Bool) {
        held = ""
        line = .start
        let trimmed = text.drop { $0 == " " }
        if inFence {
            if trimmed.hasPrefix(fenceMarker) && trimmed.dropFirst(fenceMarker.count).allSatisfy({ $0 == " " }) {
                inFence = false
                output += styled(Style.dim) + String(repeating: "─", count: min(width, 60)) + styled(Style.reset) + (ended ? "\n" : "")
            } else {
                output += styled(Style.block) + "  " + text + styled(Style.colorOff) + (ended ? "\n" : "")
            }
            return
        }
        if trimmed.hasPrefix("|") {
            tableRows.append(String(trimmed))
            if !ended { output += renderTable() }
            return
        }
        if !tableRows.isEmpty { output += renderTable() }
        if trimmed.hasPrefix("```") || trimmed.hasPrefix("~~~") {
            let marker = String(trimmed.prefix { $0 == trimmed.first })
            let language = trimmed.dropFirst(marker.count).trimmingSpaces
            inFence = true
            fenceMarker = marker
            width = columns()
            let label = language.isEmpty ? "── code " : "── \(language) "
            let rule = String(repeating: "─", count: max(3, min(width, 60) - TerminalColumns.width(of: label)))
            output += styled(Style.dim) + label + rule + styled(Style.reset) + (ended ? "\n" : "")
            return
        }
        if trimmed.count >= 3, let first = trimmed.first, "-*_".contains(first), trimmed.allSatisfy({ $0 == first || $0 == " " }),
            trimmed.filter({ $0 == first }).count >= 3
        {
            width = columns()
            output += styled(Style.dim) + String(repeating: "─", count: min(width, 80)) + styled(Style.reset) + (ended ? "\n" : "")
            return
        }
        // A short line that was never decided (`-`, `12`, `#`): plain text.
        held = text
        beginInline(into: &output)
        endInlineLine(into: &output)
        if ended { output += "\n" }
        line = .start
    }

    /// Starts an inline line: its block prefix (heading style, bullet, quote bar), then the held text.
    private mutating func beginInline(into output: inout String) {
        let text = held
        held = ""
        line = .inline
        width = columns()
        column = 0
        lineStyle = ""
        let trimmed = text.drop { $0 == " " }
        let indent = String(text.prefix(text.count - trimmed.count))
        var rest = Substring(trimmed)
        var prefix = indent
        var hanging = indent
        if rest.hasPrefix(">") {
            rest = rest.dropFirst().drop { $0 == " " }
            prefix += styled(Style.dim) + "│ " + styled(Style.boldOff)
            hanging = prefix
        } else if rest.hasPrefix("#"), let hashes = Optional(rest.prefix { $0 == "#" }),
            rest.dropFirst(hashes.count).first == " " || rest.count == hashes.count
        {
            rest = rest.dropFirst(hashes.count).drop { $0 == " " }
            if colors {
                lineStyle = hashes.count == 1 ? Style.underline + Style.bold : Style.bold
                prefix += lineStyle
            } else {
                prefix += hashes + " "
            }
        } else if let marker = rest.first, "-*+".contains(marker), rest.dropFirst().first == " " {
            rest = rest.dropFirst(2)
            prefix += "• "
            hanging = indent + "  "
        } else if let dot = rest.firstIndex(where: { $0 == "." || $0 == ")" }), rest[..<dot].allSatisfy({ $0.isNumber }),
            !rest[..<dot].isEmpty, rest[rest.index(after: dot)...].first == " "
        {
            let number = rest[...dot]
            rest = rest[rest.index(after: dot)...].dropFirst()
            prefix += number + " "
            hanging = indent + String(repeating: " ", count: number.count + 1)
        }
        output += prefix
        column = TerminalColumns.width(of: prefix)
        hangingIndent = hanging
        for character in rest { inline(character, into: &output) }
    }

    private mutating func endInlineLine(into output: inout String) {
        flushLink(into: &output)
        flushMarker(into: &output)
        flushWord(into: &output)
        pendingSpace = false
        if colors && (bold || italic || inlineCode || !lineStyle.isEmpty) { output += Style.reset }
        bold = false
        italic = false
        inlineCode = false
        lineStyle = ""
    }

    // MARK: - Inline text

    private mutating func inline(_ character: Character, into output: inout String) {
        if var text = link {
            text.append(character)
            link = text
            if let rendered = Self.completedLink(text) {
                link = nil
                appendStyled(rendered.text, style: Style.underline, off: Style.underlineOff, into: &output)
                if rendered.url != rendered.text {
                    appendStyled(" (" + rendered.url + ")", style: Style.dim, off: Style.boldOff, into: &output)
                }
            } else if !Self.mayBecomeLink(text) {
                link = nil
                for held in text { literal(held, into: &output) }
            }
            return
        }
        if inlineCode {
            if character == "`" {
                inlineCode = false
                if colors { word += Style.colorOff } else { put("`", into: &output) }
            } else {
                put(character, into: &output)
            }
            return
        }
        if !pendingMarker.isEmpty {
            if character == "*" && pendingMarker == "*" {
                pendingMarker = "**"
                return
            }
            flushMarker(into: &output)
        }
        switch character {
        case "*":
            pendingMarker = "*"
        case "`":
            inlineCode = true
            if colors { word += Style.code } else { put("`", into: &output) }
        case "[":
            link = "["
        default:
            put(character, into: &output)
        }
    }

    /// A character that is text whatever it looks like (a link that did not complete).
    private mutating func literal(_ character: Character, into output: inout String) {
        if character == "[" && link == nil {
            put(character, into: &output)
            return
        }
        inline(character, into: &output)
    }

    /// Applies a held `*` or `**`: a style toggle next to text, a literal star next to a space.
    private mutating func flushMarker(into output: inout String) {
        let marker = pendingMarker
        pendingMarker = ""
        switch marker {
        case "**":
            bold.toggle()
            if colors { word += bold ? Style.bold : Style.boldOff + lineStyle }
        case "*":
            italic.toggle()
            if colors { word += italic ? Style.italic : Style.italicOff }
        default: break
        }
    }

    private mutating func appendStyled(_ text: String, style: String, off: String, into output: inout String) {
        if colors { word += style }
        for character in text { put(character, into: &output) }
        if colors { word += off + (bold ? Style.bold : "") + lineStyle }
    }

    /// `[text](url)` complete: its parts.
    private static func completedLink(_ text: String) -> (text: String, url: String)? {
        guard text.hasSuffix(")"), let close = text.range(of: "](") else { return nil }
        let label = String(text[text.index(after: text.startIndex)..<close.lowerBound])
        let url = String(text[close.upperBound..<text.index(before: text.endIndex)])
        guard !url.contains(" ") else { return nil }
        return (label, url)
    }

    /// Whether held text starting with `[` may still become a link.
    private static func mayBecomeLink(_ text: String) -> Bool {
        guard text.count < 400 else { return false }
        guard let close = text.firstIndex(of: "]") else { return !text.dropFirst().contains("[") }
        let after = text[text.index(after: close)...]
        if after.isEmpty { return true }
        guard after.hasPrefix("(") else { return false }
        return !after.contains(" ") && !after.dropFirst().contains("(")
    }

    private mutating func flushLink(into output: inout String) {
        guard let text = link else { return }
        link = nil
        for character in text { put(character, into: &output) }
    }

    // MARK: - Wrapping

    /// One visible character of inline text: words are held until they end, then wrapped to the width.
    private mutating func put(_ character: Character, into output: inout String) {
        if character == " " {
            flushWord(into: &output)
            pendingSpace = true
            return
        }
        word.append(character)
        wordWidth += TerminalColumns.width(character)
        // A word longer than a line is broken where the line ends.
        if wordWidth >= width - TerminalColumns.width(of: hangingIndent) { flushWord(into: &output) }
    }

    private mutating func flushWord(into output: inout String) {
        guard wordWidth > 0 || !word.isEmpty else { return }
        let indentWidth = TerminalColumns.width(of: hangingIndent)
        if pendingSpace {
            if column + 1 + wordWidth > width && column > indentWidth && wordWidth > 0 {
                output += (colors && !lineStyle.isEmpty ? Style.reset : "") + "\n" + hangingIndent + lineStyle
                column = indentWidth
            } else {
                output += " "
                column += 1
            }
            pendingSpace = false
        } else if column + wordWidth > width && column > indentWidth && wordWidth > 0 {
            output += "\n" + hangingIndent
            column = indentWidth
        }
        output += word
        column += wordWidth
        word = ""
        wordWidth = 0
    }

    // MARK: - Tables

    /// The held table rows as aligned box-drawing lines no wider than the terminal.
    private mutating func renderTable() -> String {
        let rows = tableRows
        tableRows = []
        width = columns()
        var cells = rows.map(Self.cells)
        var alignments: [Character] = []
        if cells.count >= 2, cells[1].allSatisfy({ Self.isDelimiter($0) }) {
            alignments = cells[1].map { cell in
                let trimmed = cell.trimmingSpaces
                return trimmed.hasPrefix(":") && trimmed.hasSuffix(":") ? "c" : trimmed.hasSuffix(":") ? "r" : "l"
            }
            cells.remove(at: 1)
        }
        let count = cells.map(\.count).max() ?? 0
        guard count > 0 else { return "" }
        // Cell text without its Markdown markers (a table cell is laid out, so styling inside it is dropped).
        let texts = cells.map { row in (0..<count).map { $0 < row.count ? Self.plain(row[$0]) : "" } }
        var widths = (0..<count).map { column in texts.map { TerminalColumns.width(of: $0[column]) }.max() ?? 0 }
        widths = widths.map { max($0, 1) }
        let available = max(width - (3 * count + 1), count * 3)
        while widths.reduce(0, +) > available, let widest = widths.indices.max(by: { widths[$0] < widths[$1] }), widths[widest] > 3 {
            widths[widest] -= 1
        }
        let border = styled(Style.dim)
        let off = styled(Style.reset)
        func rule(_ left: String, _ middle: String, _ right: String) -> String {
            border + left + widths.map { String(repeating: "─", count: $0 + 2) }.joined(separator: middle) + right + off + "\n"
        }
        var output = rule("┌", "┬", "┐")
        for (index, row) in texts.enumerated() {
            let wrapped = row.enumerated().map { Self.wrap($0.element, width: widths[$0.offset]) }
            let height = wrapped.map(\.count).max() ?? 1
            for lineIndex in 0..<height {
                output += border + "│" + off
                for column in 0..<count {
                    let text = lineIndex < wrapped[column].count ? wrapped[column][lineIndex] : ""
                    let pad = widths[column] - TerminalColumns.width(of: text)
                    let alignment = column < alignments.count ? alignments[column] : "l"
                    let left = alignment == "r" ? pad : alignment == "c" ? pad / 2 : 0
                    let shown = index == 0 && colors ? Style.bold + text + Style.boldOff : text
                    output += " " + String(repeating: " ", count: left) + shown + String(repeating: " ", count: pad - left) + " "
                    output += border + "│" + off
                }
                output += "\n"
            }
            if index == 0 && texts.count > 1 { output += rule("├", "┼", "┤") }
        }
        output += rule("└", "┴", "┘")
        return output
    }

    /// The cells of `| a | b |` (a `\|` stays in its cell).
    private static func cells(_ row: String) -> [String] {
        var text = Substring(row.trimmingSpaces)
        if text.hasPrefix("|") { text = text.dropFirst() }
        if text.hasSuffix("|") && !text.hasSuffix("\\|") { text = text.dropLast() }
        var cells: [String] = []
        var current = ""
        var escaped = false
        for character in text {
            if escaped {
                current.append(character)
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else if character == "|" {
                cells.append(current.trimmingSpaces)
                current = ""
            } else {
                current.append(character)
            }
        }
        cells.append(current.trimmingSpaces)
        return cells
    }

    private static func isDelimiter(_ cell: String) -> Bool {
        let trimmed = cell.trimmingSpaces
        return !trimmed.isEmpty && trimmed.contains("-") && trimmed.allSatisfy { $0 == "-" || $0 == ":" }
    }

    /// Cell text with `**`, `*` and backticks removed and links as their text.
    private static func plain(_ text: String) -> String {
        var output = ""
        var index = text.startIndex
        while index < text.endIndex {
            let character = text[index]
            if character == "[", let close = text[index...].firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix("("),
                let end = text[close...].firstIndex(of: ")")
            {
                output += text[text.index(after: index)..<close]
                index = text.index(after: end)
                continue
            }
            if character != "*" && character != "`" { output.append(character) }
            index = text.index(after: index)
        }
        return output
    }

    /// Words of `text` in lines of at most `width` columns (a longer word is cut).
    private static func wrap(_ text: String, width: Int) -> [String] {
        var lines: [String] = []
        var current = ""
        var currentWidth = 0
        for word in text.split(separator: " ") {
            var piece = String(word)
            var pieceWidth = TerminalColumns.width(of: piece)
            if currentWidth > 0 && currentWidth + 1 + pieceWidth <= width {
                current += " " + piece
                currentWidth += 1 + pieceWidth
                continue
            }
            if currentWidth > 0 { lines.append(current) }
            while pieceWidth > width {
                var head = ""
                var headWidth = 0
                for character in piece {
                    let characterWidth = TerminalColumns.width(character)
                    if headWidth + characterWidth > width { break }
                    head.append(character)
                    headWidth += characterWidth
                }
                if head.isEmpty { break }
                lines.append(head)
                piece = String(piece.dropFirst(head.count))
                pieceWidth = TerminalColumns.width(of: piece)
            }
            current = piece
            currentWidth = pieceWidth
        }
        lines.append(current)
        return lines
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces.
    fileprivate var trimmingSpaces: String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}
