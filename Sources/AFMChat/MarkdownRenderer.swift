// SPDX-License-Identifier: Apache-2.0

/// Renders Markdown for a terminal as it streams in: headings and `**bold**` in bold, `` `code` `` and fenced
/// code blocks in colour, list bullets as "•".
///
/// Feed text in arbitrary pieces; the renderer holds back only what it cannot decide yet (a line start that
/// may become a fence or heading, a lone `*`), so text appears as it arrives. With `colors: false` (output is
/// not a terminal) the text passes through unchanged: Markdown is already readable as plain text.
public struct MarkdownRenderer: Sendable {
    /// ANSI SGR sequences used.
    enum Style {
        static let reset = "\u{1B}[0m"
        static let bold = "\u{1B}[1m"
        static let boldOff = "\u{1B}[22m"
        static let code = "\u{1B}[36m"
        static let codeOff = "\u{1B}[39m"
        static let fence = "\u{1B}[2m"
        static let block = "\u{1B}[33m"
    }

    public let colors: Bool
    private var atLineStart = true
    private var lineStart = ""
    private var inFence = false
    private var fenceLine = false
    private var heading = false
    private var bold = false
    private var inlineCode = false
    private var pendingStar = false

    public init(colors: Bool) {
        self.colors = colors
    }

    /// Renders the next piece of text.
    public mutating func feed(_ text: String) -> String {
        guard colors else { return text }
        var output = ""
        for character in text { render(character, into: &output) }
        return output
    }

    /// Flushes what was held back and resets styles.
    public mutating func finish() -> String {
        guard colors else { return "" }
        var output = ""
        if !lineStart.isEmpty {
            let held = lineStart
            lineStart = ""
            atLineStart = false
            for character in held { renderInline(character, into: &output) }
        }
        if pendingStar { output += "*" }
        pendingStar = false
        if bold || inlineCode || heading || inFence || fenceLine { output += Style.reset }
        self = MarkdownRenderer(colors: colors)
        return output
    }

    private mutating func render(_ character: Character, into output: inout String) {
        if character == "\n" {
            if atLineStart && !lineStart.isEmpty { flushLineStart(into: &output, lineEnded: true) }
            if pendingStar {
                output += "*"
                pendingStar = false
            }
            if heading || fenceLine || bold || inlineCode {
                output += Style.reset
                if inFence { output += Style.block }
            }
            heading = false
            fenceLine = false
            bold = false
            inlineCode = false
            output += "\n"
            atLineStart = true
            return
        }
        if atLineStart {
            lineStart.append(character)
            // Undecided while the line may still be a fence ("```"), a heading ("#"), or a bullet ("- ", "* ").
            let candidate = lineStart.drop { $0 == " " }
            if candidate.isEmpty || "```".hasPrefix(candidate) || candidate.allSatisfy({ $0 == "#" })
                || candidate == "-" || candidate == "*"
            {
                return
            }
            flushLineStart(into: &output, lineEnded: false)
            return
        }
        if inFence {
            output.append(character)
        } else {
            renderInline(character, into: &output)
        }
    }

    private mutating func flushLineStart(into output: inout String, lineEnded: Bool) {
        let line = lineStart
        lineStart = ""
        atLineStart = false
        let trimmed = line.drop { $0 == " " }
        let indent = String(line.prefix(line.count - trimmed.count))
        if trimmed.hasPrefix("```") {
            inFence.toggle()
            fenceLine = true
            output += (inFence ? Style.fence : Style.reset + Style.fence) + line
            return
        }
        if inFence {
            output += Style.block + line
            return
        }
        if trimmed.hasPrefix("#") {
            let hashes = trimmed.prefix { $0 == "#" }
            let rest = trimmed.dropFirst(hashes.count)
            if rest.isEmpty || rest.hasPrefix(" ") {
                heading = true
                output += indent + Style.bold + String(rest.drop { $0 == " " })
                return
            }
        }
        if trimmed.hasPrefix("- ") || trimmed.hasPrefix("* ") {
            output += indent + "• "
            for character in trimmed.dropFirst(2) { renderInline(character, into: &output) }
            return
        }
        output += indent
        for character in trimmed { renderInline(character, into: &output) }
    }

    private mutating func renderInline(_ character: Character, into output: inout String) {
        if inlineCode {
            if character == "`" {
                inlineCode = false
                output += Style.codeOff
            } else {
                output.append(character)
            }
            return
        }
        if pendingStar {
            pendingStar = false
            if character == "*" {
                bold.toggle()
                output += bold ? Style.bold : Style.boldOff
                return
            }
            output += "*"
        }
        switch character {
        case "*": pendingStar = true
        case "`":
            inlineCode = true
            output += Style.code
        default: output.append(character)
        }
    }
}
