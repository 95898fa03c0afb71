// SPDX-License-Identifier: Apache-2.0
import AFMLogging

/// The input line: keys in, finished lines and edits out.
///
/// On a terminal it echoes and edits (Backspace, Ctrl-U clears, Ctrl-W deletes a word, Ctrl-C clears the line,
/// Ctrl-D on an empty line ends); on a pipe it only splits lines.
///
/// Keys never insert a control character other than a tab (a pasted C1 control such as U+009B, a bidirectional
/// override): they are dropped. A line set from outside (a draft restored from the history or an imported
/// archive) keeps its text as stored, and ``displayText`` is what the terminal is sent.
struct LineEditor {
    /// What a batch of keys did.
    enum Action: Equatable {
        case line(String)
        case endOfInput
        case interrupt
    }

    let echo: Bool
    private(set) var buffer: [UInt8] = []
    private var pendingUTF8 = 0

    init(echo: Bool, initial: String = "") {
        self.echo = echo
        buffer = Array(initial.utf8)
    }

    var text: String { String(decoding: buffer, as: UTF8.self) }

    /// The line as the terminal is sent it: every control character but the tab escaped (``TerminalSafeText``).
    var displayText: String { TerminalSafeText.neutralized(text, keeping: .tab) }

    mutating func set(_ text: String) {
        buffer = Array(text.utf8)
        pendingUTF8 = 0
    }

    /// Backspace, space, backspace `count` times: erases what the terminal shows of removed characters.
    private static func erase(_ count: Int) -> String { String(repeating: "\u{8} \u{8}", count: max(0, count)) }

    /// Feeds one key byte; returns an action when a line is finished (or input ends), plus text to echo.
    mutating func feed(_ byte: UInt8, echoing output: inout String) -> Action? {
        switch byte {
        case 0x0D, 0x0A:
            let line = text
            buffer = []
            if echo { output += "\n" }
            return .line(line)
        case 0x03:
            buffer = []
            if echo { output += "^C\n" }
            return .interrupt
        case 0x04:
            if buffer.isEmpty { return .endOfInput }
            return nil
        case 0x7F, 0x08:
            guard !buffer.isEmpty else { return nil }
            // Remove one whole UTF-8 character, and as many columns as it was shown on (`\x1b` takes four).
            let before = echo ? displayText.count : 0
            while let last = buffer.popLast(), last & 0xC0 == 0x80 {}
            pendingUTF8 = 0
            if echo { output += Self.erase(before - displayText.count) }
            return nil
        case 0x15:
            if echo { output += Self.erase(displayText.count) }
            buffer = []
            pendingUTF8 = 0
            return nil
        case 0x17:
            let before = displayText.count
            while buffer.last == 0x20 { buffer.removeLast() }
            while let last = buffer.last, last != 0x20 { buffer.removeLast() }
            pendingUTF8 = 0
            if echo { output += Self.erase(before - displayText.count) }
            return nil
        case 0x1B:
            return nil  // escape sequences (arrows) are not supported; their remaining bytes are printable and kept
        default:
            if byte < 0x20 && byte != 0x09 { return nil }
            buffer.append(byte)
            // Look at complete UTF-8 characters only.
            if byte & 0xC0 == 0xC0 {
                pendingUTF8 = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : 1
            } else if byte & 0xC0 == 0x80, pendingUTF8 > 0 {
                pendingUTF8 -= 1
            }
            guard pendingUTF8 == 0 else { return nil }
            var start = buffer.count - 1
            while start > 0 && buffer[start] & 0xC0 == 0x80 && buffer[start - 1] & 0x80 != 0 { start -= 1 }
            let character = String(decoding: buffer[start...], as: UTF8.self)
            // A pasted C1 control (U+009B is CSI) or bidirectional override is never part of the line.
            if TerminalSafeText.needsEscaping(character, keeping: .tab) {
                buffer.removeSubrange(start...)
                return nil
            }
            if echo { output += character }
            return nil
        }
    }
}
