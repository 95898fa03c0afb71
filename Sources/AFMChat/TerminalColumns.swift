// SPDX-License-Identifier: Apache-2.0

/// How many terminal columns text takes, for laying out the input line and Markdown tables.
///
/// An approximation of `wcwidth(3)` that needs no locale: East Asian wide and full-width characters and emoji
/// take two columns, combining marks (inside a `Character`) none, everything else one. Text measured here has
/// been neutralized (no control characters) except for SGR styling, which ``width(of:)`` skips.
public enum TerminalColumns {
    /// The columns of one character (a grapheme cluster).
    public static func width(_ character: Character) -> Int {
        guard let first = character.unicodeScalars.first else { return 0 }
        if character.unicodeScalars.contains(where: { $0.properties.isEmojiPresentation }) { return 2 }
        if character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) && first.properties.isEmoji { return 2 }
        return isWide(first.value) ? 2 : 1
    }

    /// The columns of `text`, skipping SGR sequences (`ESC [ … m`) the client adds for styling.
    public static func width(of text: some StringProtocol) -> Int {
        var total = 0
        var inEscape = false
        for character in text {
            if inEscape {
                if character == "m" { inEscape = false }
                continue
            }
            if character == "\u{1B}" {
                inEscape = true
                continue
            }
            total += width(character)
        }
        return total
    }

    private static func isWide(_ value: UInt32) -> Bool {
        switch value {
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE30...0xFE4F, 0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x1F300...0x1F64F,
            0x1F900...0x1F9FF, 0x20000...0x3FFFD:
            return true
        default:
            return false
        }
    }
}
