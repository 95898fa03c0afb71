// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

/// A byte sequence placed inside a JSON string, and whether it is well-formed UTF-8.
struct UTF8Sample: Sendable, CustomTestStringConvertible {
    let name: String
    let bytes: [UInt8]

    var testDescription: String { name }
}

@Suite("JSONParser UTF-8 validation")
struct JSONParserUTF8Tests {
    static let invalid: [UTF8Sample] = [
        UTF8Sample(name: "overlong 2-byte '/' (C0 AF)", bytes: [0xC0, 0xAF]),
        UTF8Sample(name: "overlong 2-byte NUL (C0 80)", bytes: [0xC0, 0x80]),
        UTF8Sample(name: "overlong 2-byte (C1 BF)", bytes: [0xC1, 0xBF]),
        UTF8Sample(name: "overlong 3-byte (E0 80 AF)", bytes: [0xE0, 0x80, 0xAF]),
        UTF8Sample(name: "overlong 3-byte (E0 9F BF)", bytes: [0xE0, 0x9F, 0xBF]),
        UTF8Sample(name: "overlong 4-byte (F0 80 80 AF)", bytes: [0xF0, 0x80, 0x80, 0xAF]),
        UTF8Sample(name: "overlong 4-byte (F0 8F BF BF)", bytes: [0xF0, 0x8F, 0xBF, 0xBF]),
        UTF8Sample(name: "truncated 2-byte (C3)", bytes: [0xC3]),
        UTF8Sample(name: "truncated 3-byte (E2 82)", bytes: [0xE2, 0x82]),
        UTF8Sample(name: "truncated 4-byte (F0 9F 98)", bytes: [0xF0, 0x9F, 0x98]),
        UTF8Sample(name: "truncated 3-byte then ASCII (E2 41)", bytes: [0xE2, 0x41]),
        UTF8Sample(name: "lone continuation byte (80)", bytes: [0x80]),
        UTF8Sample(name: "lone continuation byte (BF)", bytes: [0xBF]),
        UTF8Sample(name: "FF", bytes: [0xFF]),
        UTF8Sample(name: "FE", bytes: [0xFE]),
        UTF8Sample(name: "5-byte lead (F8 88 80 80 80)", bytes: [0xF8, 0x88, 0x80, 0x80, 0x80]),
        UTF8Sample(name: "lead above U+10FFFF (F5 80 80 80)", bytes: [0xF5, 0x80, 0x80, 0x80]),
        UTF8Sample(name: "U+110000 (F4 90 80 80)", bytes: [0xF4, 0x90, 0x80, 0x80]),
        UTF8Sample(name: "encoded high surrogate U+D800 (ED A0 80)", bytes: [0xED, 0xA0, 0x80]),
        UTF8Sample(name: "encoded low surrogate U+DFFF (ED BF BF)", bytes: [0xED, 0xBF, 0xBF]),
        UTF8Sample(name: "CESU-8 surrogate pair", bytes: [0xED, 0xA0, 0xBD, 0xED, 0xB8, 0x80]),
    ]

    static let valid: [UTF8Sample] = [
        UTF8Sample(name: "U+0080", bytes: [0xC2, 0x80]),
        UTF8Sample(name: "é", bytes: [0xC3, 0xA9]),
        UTF8Sample(name: "U+07FF", bytes: [0xDF, 0xBF]),
        UTF8Sample(name: "U+0800", bytes: [0xE0, 0xA0, 0x80]),
        UTF8Sample(name: "€", bytes: [0xE2, 0x82, 0xAC]),
        UTF8Sample(name: "U+D7FF", bytes: [0xED, 0x9F, 0xBF]),
        UTF8Sample(name: "U+E000", bytes: [0xEE, 0x80, 0x80]),
        UTF8Sample(name: "U+FFFF", bytes: [0xEF, 0xBF, 0xBF]),
        UTF8Sample(name: "U+10000", bytes: [0xF0, 0x90, 0x80, 0x80]),
        UTF8Sample(name: "😀", bytes: [0xF0, 0x9F, 0x98, 0x80]),
        UTF8Sample(name: "U+10FFFF", bytes: [0xF4, 0x8F, 0xBF, 0xBF]),
    ]

    static func quoted(_ bytes: [UInt8]) -> [UInt8] {
        [UInt8(ascii: "\"")] + bytes + [UInt8(ascii: "\"")]
    }

    @Test("ill-formed UTF-8 in a string is rejected at the first bad byte", arguments: invalid)
    func invalidInString(_ sample: UTF8Sample) {
        let error = parseError(Self.quoted(sample.bytes))
        #expect(error?.kind == .invalidUTF8)
        #expect(error?.offset == 1)
    }

    @Test("ill-formed UTF-8 is rejected after ASCII, after an escape, in keys and at the end", arguments: invalid)
    func invalidInContext(_ sample: UTF8Sample) {
        let prefix = Array(#"["abcdefghijk\n"#.utf8)
        let inLongString = parseError(prefix + sample.bytes + Array(#"xyz"]"#.utf8))
        #expect(inLongString?.kind == .invalidUTF8)
        #expect(inLongString?.offset == prefix.count)

        let inKey = parseError(Array(#"{"k"#.utf8) + sample.bytes + Array(#"":1}"#.utf8))
        #expect(inKey?.kind == .invalidUTF8)
        #expect(inKey?.offset == 3)

        let unterminated = parseError(Array(#""x"#.utf8) + sample.bytes)
        #expect(unterminated?.kind == .invalidUTF8)
        #expect(unterminated?.offset == 2)

        let outside = parseError(Array("[1, ".utf8) + sample.bytes + Array("]".utf8))
        #expect(outside?.kind == .invalidUTF8)
        #expect(outside?.offset == 4)

        let trailing = parseError(Array("{} ".utf8) + sample.bytes)
        #expect(trailing?.kind == .invalidUTF8)
        #expect(trailing?.offset == 3)
    }

    @Test("well-formed UTF-8 of every length is accepted unchanged", arguments: valid)
    func validSequences(_ sample: UTF8Sample) throws {
        let value = try JSONParser.parse(Self.quoted(sample.bytes))
        #expect(value.stringValue.map { Array($0.utf8) } == sample.bytes)
        #expect(value.encoded() == Self.quoted(sample.bytes))
        // Also inside a longer string with an escape, which takes the slow path.
        let long = Array(#""0123456789\t"#.utf8) + sample.bytes + Array(#"""#.utf8)
        #expect(try JSONParser.parse(long).stringValue.map { Array($0.utf8) } == Array("0123456789\t".utf8) + sample.bytes)
    }

    @Test("bad UTF-8 before another error is reported first")
    func errorOrder() {
        let beforeControl = parseError([UInt8(ascii: "\""), 0xFF, 0x01, UInt8(ascii: "\"")])
        #expect(beforeControl?.kind == .invalidUTF8)
        let beforeBadEscape = parseError([UInt8(ascii: "\""), 0xFF] + Array(#"\x""#.utf8))
        #expect(beforeBadEscape?.kind == .invalidUTF8)
        let afterValidText = parseError(Array("\"é".utf8) + [0xFF, UInt8(ascii: "\"")])
        #expect(afterValidText?.offset == 3)
        let afterEscape = parseError(Array(#""\n"#.utf8) + [0xFF, UInt8(ascii: "\"")])
        #expect(afterEscape?.offset == 3)
    }

    @Test("valid non-ASCII outside strings is a syntax error, not a UTF-8 error")
    func validNonASCIIOutsideStrings() {
        let error = parseError("[1, é]")
        #expect(error?.kind == .syntax)
        #expect(error?.message.contains("U+00E9") == true)
    }
}
