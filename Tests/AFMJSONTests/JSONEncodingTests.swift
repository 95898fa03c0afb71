// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation
import Testing

@Suite("JSONEncoding")
struct JSONEncodingTests {
    static func escaped(_ s: String) -> String {
        var buffer: [UInt8] = []
        JSONEncoding.appendEscapedString(s, to: &buffer)
        return String(decoding: buffer, as: UTF8.self)
    }

    @Test(
        "the short escapes are used where JSON has them",
        arguments: [
            ("\"", #""\"""#), ("\\", #""\\""#), ("\u{08}", #""\b""#), ("\u{0C}", #""\f""#), ("\n", #""\n""#),
            ("\r", #""\r""#), ("\t", #""\t""#), ("", #""""#),
        ])
    func shortEscapes(input: String, expected: String) {
        #expect(Self.escaped(input) == expected)
    }

    @Test("every other control character is written as \\u00XX with lowercase hex")
    func controlCharacters() throws {
        let short: Set<UInt8> = [0x08, 0x09, 0x0A, 0x0C, 0x0D]
        for byte in UInt8(0)..<0x20 where !short.contains(byte) {
            let input = String(UnicodeScalar(byte))
            let hex = String(byte, radix: 16)
            let expected = "\"\\u00" + (hex.count == 1 ? "0" : "") + hex + "\""
            #expect(Self.escaped(input) == expected)
            #expect(try JSONParser.parse(expected).stringValue == input)
        }
    }

    @Test("nothing else is escaped: '/', DEL, non-ASCII, U+2028 stay as UTF-8")
    func noOtherEscapes() {
        let text = "a/b \u{7F} é € 😀 \u{2028}\u{2029} \u{FFFF}"
        #expect(Self.escaped(text) == "\"" + text + "\"")
    }

    @Test("escapes inside long text, at every position relative to an 8-byte word")
    func escapesAtEveryOffset() throws {
        for length in 0..<20 {
            let padding = String(repeating: "p", count: length)
            let input = padding + "\"" + padding + "\n" + padding + "\u{1}é"
            let output = Self.escaped(input)
            #expect(output == "\"\(padding)\\\"\(padding)\\n\(padding)\\u0001é\"")
            #expect(try JSONParser.parse(output).stringValue == input)
        }
    }

    @Test("substrings and raw UTF-8 buffers escape the same way as strings")
    func otherInputs() {
        let text = "say \"hi\"\n"
        var fromSubstring: [UInt8] = []
        JSONEncoding.appendEscapedString(text.dropFirst(4), to: &fromSubstring)
        #expect(String(decoding: fromSubstring, as: UTF8.self) == #""\"hi\"\n""#)
        var fromBuffer: [UInt8] = Array("prefix:".utf8)
        Array(text.utf8).withUnsafeBufferPointer { JSONEncoding.appendEscapedString(utf8: $0, to: &fromBuffer) }
        #expect(String(decoding: fromBuffer, as: UTF8.self) == #"prefix:"say \"hi\"\n""#)
        var empty: [UInt8] = []
        JSONEncoding.appendEscapedString(utf8: UnsafeBufferPointer(start: nil, count: 0), to: &empty)
        #expect(empty == Array(#""""#.utf8))
    }

    @Test("encode(into:) appends to what the buffer already holds")
    func encodeInto() {
        var buffer = Array("data: ".utf8)
        let value: JSONValue = ["id": 1]
        value.encode(into: &buffer)
        buffer.append(UInt8(ascii: "\n"))
        JSONEncoding.append(["x": nil], to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "data: {\"id\":1}\n{\"x\":null}")
    }

    @Test("pretty printing uses two-space indentation and keeps order")
    func prettyPrinted() throws {
        let value: JSONValue = ["b": [1, ["c": "x"]], "a": [], "e": [:], "n": nil]
        let expected = """
            {
              "b": [
                1,
                {
                  "c": "x"
                }
              ],
              "a": [],
              "e": {},
              "n": null
            }
            """
        #expect(value.prettyPrinted() == expected)
        #expect(try JSONParser.parse(expected) == value)
        #expect(JSONValue.string("a\nb").prettyPrinted() == #""a\nb""#)
        var buffer: [UInt8] = []
        JSONEncoding.appendPretty([1], level: 1, to: &buffer)
        #expect(String(decoding: buffer, as: UTF8.self) == "[\n    1\n  ]")
    }

    @Test("random values round-trip through the encoder and parser")
    func randomRoundTrip() throws {
        var rng = SplitMix64(state: 42)
        for _ in 0..<300 {
            let value = RandomJSON.value(&rng)
            let bytes = value.encoded()
            let parsed = try JSONParser.parse(bytes)
            #expect(parsed == value)
            #expect(parsed.encoded() == bytes)
            #expect(try JSONParser.parse(value.prettyPrinted()) == value)
            #expect(value.jsonString == String(decoding: bytes, as: UTF8.self))
        }
    }

    @Test("an independent parser (Foundation) reads the encoder's strings back exactly")
    func foundationAgrees() throws {
        var rng = SplitMix64(state: 99)
        for _ in 0..<200 {
            let strings = (0..<8).map { _ in RandomJSON.string(&rng) }
            let value = JSONValue.array(strings.map { .string($0) })
            let decoded = try JSONSerialization.jsonObject(with: Data(value.encoded())) as? [String]
            #expect(decoded == strings)
        }
    }

    @Test(
        "appending to a buffer writes what encoded() returns, scalars and empty containers included",
        arguments: [
            JSONValue.null, true, false, 0, -12.5e3, "", "a\"b\u{1}é", [], [:], [1, "x", nil], ["k": ["n": [true]]],
        ] as [JSONValue])
    func appendMatchesEncoded(value: JSONValue) {
        var buffer: [UInt8] = Array("prefix:".utf8)
        value.encode(into: &buffer)
        #expect(buffer == Array("prefix:".utf8) + value.encoded())
    }
}
