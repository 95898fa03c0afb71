// SPDX-License-Identifier: Apache-2.0

/// Neutralizes control characters in text that came from outside (a model, an upstream, a client, a file) before
/// it reaches a log line or a terminal.
///
/// A terminal executes what it is sent: ESC (`\u{1B}`) and the C1 controls (U+0080–U+009F, `CSI` is U+009B) start
/// sequences that retitle the window, clear it, move the cursor to fake a prompt, write the clipboard (OSC 52),
/// plant hyperlinks (OSC 8), or make the terminal *answer* on standard input (`ESC[6n`). A newline in a log message
/// forges a second log line. So every C0 control (U+0000–U+001F), DEL (U+007F), every C1 control and the Unicode
/// line and paragraph separators (U+2028, U+2029, which some viewers break lines at) and the bidirectional controls
/// (U+202A–U+202E, U+2066–U+2069, U+200E, U+200F, U+061C, which reorder what is shown) and U+FEFF are replaced by a
/// visible, inert escape such as `\x1b`, `\n`, `\u2028` or `\u202e`; only the characters the caller keeps
/// (``Kept``) pass through.
///
/// This is the one implementation: the logger, `afmctl` and `afm chat` all use it. It works per Unicode scalar and
/// keeps no state, so a sequence split across streamed pieces is neutralized piece by piece just the same.
public enum TerminalSafeText {
    /// Control characters that pass through unchanged.
    public struct Kept: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Line feed (U+000A): message text that is shown on several lines.
        public static let newline = Kept(rawValue: 1 << 0)
        /// Horizontal tab (U+0009).
        public static let tab = Kept(rawValue: 1 << 1)
        /// What message text keeps on a terminal: line feeds and tabs.
        public static let messageText: Kept = [.newline, .tab]
    }

    /// How a neutralized character is spelled.
    public enum Notation: Sendable, Hashable {
        /// `\n`, `\r`, `\t`, `\x1b`, `\x9b`, `\u2028`: for people (log lines, terminal output).
        case backslash
        /// `\u001b`, `\u009b`: valid inside a JSON string, for JSON printed on a terminal.
        case json
    }

    /// Whether `scalar` is neutralized (unless kept).
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F, 0x2028, 0x2029: true
        // Bidirectional controls reorder what is shown (Trojan Source): embeddings and overrides, isolates,
        // the implicit marks, the Arabic letter mark; and the byte-order mark, invisible inside text.
        case 0x202A...0x202E, 0x2066...0x2069, 0x200E, 0x200F, 0x061C, 0xFEFF: true
        default: false
        }
    }

    /// Whether `text` has a character that ``neutralized(_:keeping:notation:)`` would replace.
    public static func needsEscaping(_ text: some StringProtocol, keeping kept: Kept = []) -> Bool {
        text.unicodeScalars.contains { isControl($0) && !keeps($0, kept) }
    }

    /// `text` with every control character that is not kept replaced by its visible escape.
    ///
    /// - Parameters:
    ///   - text: the untrusted text.
    ///   - kept: control characters to pass through (``Kept/messageText`` for text shown on several lines).
    ///   - notation: how replaced characters are spelled.
    /// - Returns: text that holds no terminal control sequence and, unless `.newline` is kept, no line break.
    public static func neutralized(
        _ text: some StringProtocol, keeping kept: Kept = [], notation: Notation = .backslash
    ) -> String {
        guard needsEscaping(text, keeping: kept) else { return String(text) }
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            guard isControl(scalar), !keeps(scalar, kept) else {
                out.append(scalar)
                continue
            }
            out.append(contentsOf: escape(scalar, notation: notation).unicodeScalars)
        }
        return String(out)
    }

    private static func keeps(_ scalar: Unicode.Scalar, _ kept: Kept) -> Bool {
        (scalar == "\n" && kept.contains(.newline)) || (scalar == "\t" && kept.contains(.tab))
    }

    private static func escape(_ scalar: Unicode.Scalar, notation: Notation) -> String {
        let hex = String(scalar.value, radix: 16)
        switch notation {
        case .json:
            return "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
        case .backslash:
            switch scalar {
            case "\n": return "\\n"
            case "\r": return "\\r"
            case "\t": return "\\t"
            default:
                return scalar.value > 0xFF
                    ? "\\u" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex : "\\x" + (hex.count == 1 ? "0" : "") + hex
            }
        }
    }
}
