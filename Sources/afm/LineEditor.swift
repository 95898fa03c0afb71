// SPDX-License-Identifier: Apache-2.0

/// The input line: keys in, finished lines and edits out.
///
/// On a terminal it echoes and edits (Backspace, Ctrl-U clears, Ctrl-W deletes a word, Ctrl-C clears the line,
/// Ctrl-D on an empty line ends); on a pipe it only splits lines.
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

    mutating func set(_ text: String) { buffer = Array(text.utf8) }

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
            // Remove one whole UTF-8 character.
            while let last = buffer.popLast(), last & 0xC0 == 0x80 {}
            if echo { output += "\u{8} \u{8}" }
            return nil
        case 0x15:
            if echo { output += String(repeating: "\u{8} \u{8}", count: text.count) }
            buffer = []
            return nil
        case 0x17:
            let before = text.count
            while buffer.last == 0x20 { buffer.removeLast() }
            while let last = buffer.last, last != 0x20 { buffer.removeLast() }
            if echo { output += String(repeating: "\u{8} \u{8}", count: before - text.count) }
            return nil
        case 0x1B:
            return nil  // escape sequences (arrows) are not supported; their remaining bytes are printable and kept
        default:
            if byte < 0x20 && byte != 0x09 { return nil }
            buffer.append(byte)
            if echo {
                // Echo complete UTF-8 characters only.
                if byte & 0xC0 == 0xC0 {
                    pendingUTF8 = byte >= 0xF0 ? 3 : byte >= 0xE0 ? 2 : 1
                } else if byte & 0xC0 == 0x80, pendingUTF8 > 0 {
                    pendingUTF8 -= 1
                }
                if pendingUTF8 == 0 {
                    var start = buffer.count - 1
                    while start > 0 && buffer[start] & 0xC0 == 0x80 { start -= 1 }
                    output += String(decoding: buffer[start...], as: UTF8.self)
                }
            }
            return nil
        }
    }
}
