// SPDX-License-Identifier: Apache-2.0
import AFMLogging
import Testing

@Suite struct TerminalSafeTextTests {
    @Test(arguments: [
        ("\u{1B}]0;title\u{07}", [], #"\x1b]0;title\x07"#),
        ("\u{1B}]52;c;aGk=\u{1B}\\", [], #"\x1b]52;c;aGk=\x1b\"#),
        ("a\nb\tc\r\n", [], #"a\nb\tc\r\n"#),
        ("a\nb\tc\r\n", TerminalSafeText.Kept.messageText, "a\nb\tc\\r\n"),
        ("\u{9B}6n\u{85}\u{7F}\u{0}", TerminalSafeText.Kept.messageText, #"\x9b6n\x85\x7f\x00"#),
        ("line\u{2028}sep\u{2029}", [], #"line\u2028sep\u2029"#),
        ("héllo — 日本 👍", [], "héllo — 日本 👍"),
    ] as [(String, TerminalSafeText.Kept, String)])
    func neutralizesControlCharactersVisibly(input: String, kept: TerminalSafeText.Kept, expected: String) {
        #expect(TerminalSafeText.neutralized(input, keeping: kept) == expected)
    }

    @Test func jsonNotationStaysValidJSON() {
        #expect(TerminalSafeText.neutralized("\"a\u{9B}b\u{7F}\"", notation: .json) == #""a\u009bb\u007f""#)
    }

    /// Bidirectional controls reorder what a terminal shows (a `.txt` that is really `.exe`, a prompt that reads
    /// backwards): they are escaped like the other controls.
    @Test(arguments: [0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069, 0x200E, 0x200F, 0x061C, 0xFEFF] as [UInt32])
    func bidiControlsAreEscaped(value: UInt32) throws {
        let scalar = try #require(Unicode.Scalar(value))
        let text = "a" + String(Character(scalar)) + "b"
        let safe = TerminalSafeText.neutralized(text)
        #expect(!safe.unicodeScalars.contains(scalar))
        let hex = String(value, radix: 16)
        #expect(safe == "a\\u" + String(repeating: "0", count: 4 - hex.count) + hex + "b")
        #expect(TerminalSafeText.neutralized("a\u{202E}b", notation: .json) == "a\\u202eb")
    }
}
