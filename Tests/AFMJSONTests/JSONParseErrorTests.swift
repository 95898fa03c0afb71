// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

@Suite("JSONParseError")
struct JSONParseErrorTests {
    @Test("messages name the byte offset and what was expected")
    func messageFormat() throws {
        let text = #"{"model":"m","n":1 "x":2}"#
        let error = try #require(parseError(text))
        #expect(error.kind == .syntax)
        #expect(error.offset == 19)
        #expect(error.message == #"invalid JSON at byte 19: expected ',' or '}' after object member, found '"'"#)
        #expect(error.description == error.message)
        #expect("\(error)" == error.message)
    }

    @Test("messages describe unprintable and non-ASCII bytes by code point")
    func unprintable() throws {
        let control = try #require(parseError("[\u{1}]"))
        #expect(control.message.hasSuffix("found U+0001"))
        let emoji = try #require(parseError("[😀]"))
        #expect(emoji.message.hasSuffix("found U+1F600"))
    }

    @Test("duplicate-key messages quote the key safely")
    func duplicateKeyMessage() throws {
        let error = try #require(parseError(#"{"a\nb":1,"a\nb":2}"#))
        #expect(error.kind == .duplicateKey)
        #expect(error.message == #"invalid JSON at byte 10: duplicate key "a\nb" in object"#)
        let long = String(repeating: "k", count: 100)
        let longError = try #require(parseError("{\"\(long)\":1,\"\(long)\":2}"))
        #expect(longError.message.contains(String(repeating: "k", count: 64) + "…"))
        #expect(!longError.message.contains(String(repeating: "k", count: 65)))
    }

    @Test("errors are values: constructible, equatable and hashable")
    func valueSemantics() {
        let a = JSONParseError(kind: .trailingData, offset: 3, detail: "unexpected data after the JSON value")
        let b = JSONParseError(
            kind: .trailingData, offset: 3, message: "invalid JSON at byte 3: unexpected data after the JSON value")
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(parseError("1  2") == a)
        #expect(a != JSONParseError(kind: .syntax, offset: 3, message: a.message))
    }

    @Test("the error is thrown with its concrete type")
    func typedThrows() {
        do {
            _ = try JSONParser.parse("[")
            Issue.record("expected an error")
        } catch {
            // `error` is statically a JSONParseError: no cast needed.
            #expect(error.kind == .unexpectedEnd)
            #expect(error.offset == 1)
        }
    }
}
