// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

/// One malformed document and the error it must produce.
struct Malformed: Sendable, CustomTestStringConvertible {
    let bytes: [UInt8]
    let kind: JSONParseError.Kind
    let offset: Int

    init(_ text: String, _ kind: JSONParseError.Kind, at offset: Int) {
        self.bytes = Array(text.utf8)
        self.kind = kind
        self.offset = offset
    }

    init(bytes: [UInt8], _ kind: JSONParseError.Kind, at offset: Int) {
        self.bytes = bytes
        self.kind = kind
        self.offset = offset
    }

    var testDescription: String {
        String(decoding: bytes, as: UTF8.self).debugDescription
    }
}

@Suite("JSONParser")
struct JSONParserTests {
    // MARK: Round trips

    @Test("a document round-trips byte for byte with key order preserved")
    func roundTripKeepsOrder() throws {
        let text = #"{"b":1,"a":{"z":[],"y":null}}"#
        let value = try JSONParser.parse(text)
        #expect(value.encoded() == Array(text.utf8))
        #expect(value.objectValue?.keys == ["b", "a"])
        #expect(value["a"]?.objectValue?.keys == ["z", "y"])
    }

    @Test("whitespace is accepted between all tokens and dropped when re-encoding")
    func whitespace() throws {
        let text = " \t\r\n{ \"a\" :\n[ 1 ,\t2 ] , \"b\"\r:\r\"x\" } \n"
        let value = try JSONParser.parse(text)
        #expect(value.jsonString == #"{"a":[1,2],"b":"x"}"#)
    }

    @Test("scalars are valid top-level documents")
    func topLevelScalars() throws {
        #expect(try JSONParser.parse("null") == .null)
        #expect(try JSONParser.parse("true") == .bool(true))
        #expect(try JSONParser.parse("false") == .bool(false))
        #expect(try JSONParser.parse(" 42 ") == .number(JSONNumber(42)))
        #expect(try JSONParser.parse(#""hi""#) == .string("hi"))
        #expect(try JSONParser.parse("[]") == .array([]))
        #expect(try JSONParser.parse("{}") == .object(JSONObject()))
    }

    @Test("a realistic request body parses into the expected structure")
    func realisticBody() throws {
        let text = #"""
            {"model":"afm-small","messages":[{"role":"system","content":"Be brief."},
            {"role":"user","content":"Caf\u00e9 \ud83d\ude00 \"quoted\"\nnext"}],
            "temperature":0.7,"max_tokens":256,"stream":false,"stop":null,"seed":9223372036854775807}
            """#
        let value = try JSONParser.parse(text)
        #expect(value["model"]?.stringValue == "afm-small")
        #expect(value["messages"]?[1]?["content"]?.stringValue == "Café 😀 \"quoted\"\nnext")
        #expect(value["temperature"]?.numberValue?.doubleValue == 0.7)
        #expect(value["max_tokens"]?.numberValue?.intValue == 256)
        #expect(value["stream"]?.boolValue == false)
        #expect(value["stop"]?.isNull == true)
        #expect(value["seed"]?.numberValue?.int64Value == Int64.max)
        #expect(value.objectValue?.keys == ["model", "messages", "temperature", "max_tokens", "stream", "stop", "seed"])
    }

    @Test("all entry points agree")
    func entryPoints() throws {
        let text = #"{"k":[1,"é",null]}"#
        let bytes = Array(text.utf8)
        let fromString = try JSONParser.parse(text)
        let fromArray = try JSONParser.parse(bytes)
        let fromRaw = try bytes.withUnsafeBytes { raw throws(JSONParseError) in try JSONParser.parse(raw) }
        let fromBuffer = try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try JSONParser.parse(buffer)
        }
        #expect(fromString == fromArray)
        #expect(fromRaw == fromArray)
        #expect(fromBuffer == fromArray)
        let empty = #expect(throws: JSONParseError.self) { try JSONParser.parse(UnsafeRawBufferPointer(start: nil, count: 0)) }
        #expect(empty?.kind == .unexpectedEnd)
    }

    // MARK: Strings and escapes

    @Test("every RFC 8259 escape decodes")
    func escapes() throws {
        let value = try JSONParser.parse(#""\"\\\/\b\f\n\r\t""#)
        #expect(value.stringValue == "\"\\/\u{08}\u{0C}\n\r\t")
    }

    @Test(
        "\\u escapes decode to the right scalar",
        arguments: [
            (#""\u0000""#, "\u{0}"),
            (#""\u001f""#, "\u{1F}"),
            (#""\u0041\u0062c""#, "Abc"),
            (#""\u00e9""#, "é"),
            (#""\u00E9""#, "é"),
            (#""\u20AC""#, "€"),
            (#""\uFFFF""#, "\u{FFFF}"),
            (#""\uD83D\uDE00""#, "😀"),
            (#""\ud83d\ude00""#, "😀"),
            (#""\uD800\uDC00""#, "\u{10000}"),
            (#""\uDBFF\uDFFF""#, "\u{10FFFF}"),
            (#""a\uD83D\uDE00b\n""#, "a😀b\n"),
        ])
    func unicodeEscapes(json: String, expected: String) throws {
        #expect(try JSONParser.parse(json).stringValue == expected)
    }

    @Test("raw non-ASCII text is kept, with and without escapes in the same string")
    func rawUnicode() throws {
        #expect(try JSONParser.parse("\"Grüße, 世界 😀\"").stringValue == "Grüße, 世界 😀")
        #expect(try JSONParser.parse("\"Grüße\\n世界\"").stringValue == "Grüße\n世界")
        #expect(try JSONParser.parse("\"\u{10FFFF}\u{D7FF}\u{E000}\"").stringValue == "\u{10FFFF}\u{D7FF}\u{E000}")
    }

    @Test(
        "lone or mismatched surrogates are invalid escapes",
        arguments: [
            #""\uD800""#, #""\uDBFF x""#, #""\uDC00""#, #""\uDFFF\uD800""#, #""\uD800\u0041""#,
            #""\uD800\n""#, #""\uD800\uD800""#, #""a\uDE00""#,
        ])
    func loneSurrogates(json: String) {
        let error = parseError(json)
        #expect(error?.kind == .invalidEscape)
    }

    @Test("long strings with escapes at word boundaries decode correctly")
    func longStrings() throws {
        for length in 0..<40 {
            let plain = String(repeating: "x", count: length)
            #expect(try JSONParser.parse("\"\(plain)\"").stringValue == plain)
            #expect(try JSONParser.parse("\"\(plain)\\n\(plain)\"").stringValue == plain + "\n" + plain)
            #expect(parseError("\"\(plain)\u{1}\"")?.offset == 1 + length)
        }
    }

    @Test("maxStringBytes limits decoded keys and values")
    func stringLimit() throws {
        let limits = JSONParser.Limits(maxStringBytes: 3)
        #expect(try JSONParser.parse(#"{"abc":"déf"}"#, limits: .init(maxStringBytes: 4)) == ["abc": "déf"])
        #expect(try JSONParser.parse(#""abc""#, limits: limits) == "abc")
        #expect(try JSONParser.parse(#""\u0061\u0062c""#, limits: limits) == "abc")
        #expect(parseError(#""abcd""#, limits: limits)?.kind == .syntax)
        #expect(parseError(#"{"abcd":1}"#, limits: limits)?.offset == 1)
        #expect(parseError(#""\u00e9\u00e9""#, limits: limits)?.kind == .syntax)
        #expect(parseError(#"["ab", "abcd"]"#, limits: limits)?.offset == 7)
    }

    // MARK: Malformed documents

    static let malformed: [Malformed] = [
        Malformed("", .unexpectedEnd, at: 0),
        Malformed("   ", .unexpectedEnd, at: 3),
        Malformed("[1,]", .syntax, at: 3),
        Malformed(#"{"a":1,}"#, .syntax, at: 7),
        Malformed("[1 2]", .syntax, at: 3),
        Malformed(#"{"a" 1}"#, .syntax, at: 5),
        Malformed(#"{"a":1 "b":2}"#, .syntax, at: 7),
        Malformed("{a:1}", .syntax, at: 1),
        Malformed("{'a':1}", .syntax, at: 1),
        Malformed("['a']", .syntax, at: 1),
        Malformed("// comment\n1", .syntax, at: 0),
        Malformed("/* c */ 1", .syntax, at: 0),
        Malformed("[1] // c", .trailingData, at: 4),
        Malformed("NaN", .syntax, at: 0),
        Malformed("Infinity", .syntax, at: 0),
        Malformed("-Infinity", .invalidNumber, at: 1),
        Malformed("01", .invalidNumber, at: 0),
        Malformed("-01", .invalidNumber, at: 1),
        Malformed("[00]", .invalidNumber, at: 1),
        Malformed("1.", .invalidNumber, at: 2),
        Malformed(".5", .invalidNumber, at: 0),
        Malformed("+1", .invalidNumber, at: 0),
        Malformed("1e", .invalidNumber, at: 2),
        Malformed("1e+", .invalidNumber, at: 3),
        Malformed("-", .invalidNumber, at: 1),
        Malformed("1.e5", .invalidNumber, at: 2),
        Malformed("[-]", .invalidNumber, at: 2),
        Malformed("0x10", .trailingData, at: 1),
        Malformed("1e999x", .trailingData, at: 5),
        Malformed("\"a\u{1}b\"", .syntax, at: 2),
        Malformed("\"tab\there\"", .syntax, at: 4),
        Malformed("\"line\nbreak\"", .syntax, at: 5),
        Malformed("\"nul\u{0}\"", .syntax, at: 4),
        Malformed(#""\x""#, .invalidEscape, at: 1),
        Malformed(#""\'""#, .invalidEscape, at: 1),
        Malformed(#""ok\U0041""#, .invalidEscape, at: 3),
        Malformed(#""\u12G4""#, .invalidEscape, at: 1),
        Malformed(#""\u-123""#, .invalidEscape, at: 1),
        Malformed(#""\uD800""#, .invalidEscape, at: 1),
        Malformed(#""\uDC00""#, .invalidEscape, at: 1),
        Malformed(#""\uD800\u0041""#, .invalidEscape, at: 1),
        Malformed(#""abc"#, .unexpectedEnd, at: 4),
        Malformed(#""\u12"#, .unexpectedEnd, at: 5),
        Malformed(#""\"#, .unexpectedEnd, at: 2),
        Malformed(#""\uD800"#, .unexpectedEnd, at: 7),
        Malformed("[", .unexpectedEnd, at: 1),
        Malformed("[1,", .unexpectedEnd, at: 3),
        Malformed(#"{"a":"#, .unexpectedEnd, at: 5),
        Malformed(#"{"a""#, .unexpectedEnd, at: 4),
        Malformed("{", .unexpectedEnd, at: 1),
        Malformed("tru", .unexpectedEnd, at: 3),
        Malformed("nul", .unexpectedEnd, at: 3),
        Malformed("trux", .syntax, at: 3),
        Malformed("True", .syntax, at: 0),
        Malformed("nulll", .trailingData, at: 4),
        Malformed("[1]]", .trailingData, at: 3),
        Malformed("1 2", .trailingData, at: 2),
        Malformed("{} x", .trailingData, at: 3),
        Malformed(#"{"a":1,"a":2}"#, .duplicateKey, at: 7),
        Malformed(String(repeating: "[", count: 65), .depthLimitExceeded, at: 64),
        Malformed(String(repeating: #"{"a":"#, count: 65), .depthLimitExceeded, at: 320),
        Malformed("\u{0C}1", .syntax, at: 0),
        Malformed("\u{A0}1", .syntax, at: 0),
        Malformed("[1,,2]", .syntax, at: 3),
        Malformed("[,1]", .syntax, at: 1),
        Malformed("{,}", .syntax, at: 1),
        Malformed(#"{"a"::1}"#, .syntax, at: 5),
        Malformed("[1}", .syntax, at: 2),
        Malformed(#"{"a":1]"#, .syntax, at: 6),
        Malformed(#"{"a":1}}"#, .trailingData, at: 7),
        Malformed(bytes: [0xEF, 0xBB, 0xBF, 0x7B, 0x7D], .syntax, at: 0),
        Malformed(bytes: [0xFF], .invalidUTF8, at: 0),
        Malformed(bytes: Array(#"[""#.utf8) + [0xC0, 0x80] + Array(#""]"#.utf8), .invalidUTF8, at: 2),
        Malformed(bytes: Array("[1, ".utf8) + [0xFF] + Array("]".utf8), .invalidUTF8, at: 4),
    ]

    @Test("malformed documents fail with the expected kind and offset", arguments: malformed)
    func malformedDocuments(_ sample: Malformed) {
        let error = parseError(sample.bytes)
        #expect(error?.kind == sample.kind)
        #expect(error?.offset == sample.offset)
        if let error {
            #expect(error.message.hasPrefix("invalid JSON at byte \(sample.offset): "))
        }
    }

    @Test("the malformed table is large enough to mean something")
    func malformedTableSize() {
        #expect(Self.malformed.count >= 40)
        let kinds = Set(Self.malformed.map(\.kind))
        #expect(kinds.count == 8)
    }

    // MARK: Duplicate keys

    @Test("duplicate keys are rejected at the second occurrence, in small and large objects")
    func duplicateKeys() throws {
        #expect(parseError(#"{"a":1,"b":2,"a":3}"#)?.kind == .duplicateKey)
        #expect(parseError(#"{"a":{"x":1},"b":{"x":1,"x":2}}"#)?.offset == 24)
        // Same key in different objects is fine.
        #expect(try JSONParser.parse(#"[{"a":1},{"a":2}]"#)[1]?["a"] == 2)

        for count in [2, 12, 13, 14, 200] {
            let members = (0..<count).map { "\"k\($0)\":\($0)" }
            let valid = "{" + members.joined(separator: ",") + "}"
            let value = try JSONParser.parse(valid)
            #expect(value.objectValue?.count == count)
            #expect(value["k\(count - 1)"]?.numberValue?.intValue == count - 1)
            for duplicate in [0, count / 2, count - 1] {
                let text = "{" + members.joined(separator: ",") + ",\"k\(duplicate)\":0}"
                let error = parseError(text)
                #expect(error?.kind == .duplicateKey)
                #expect(error?.offset == valid.utf8.count)
                #expect(error?.message.contains("\"k\(duplicate)\"") == true)
            }
        }
    }

    @Test("keys that differ only by escaping are duplicates")
    func duplicateKeysThroughEscapes() {
        #expect(parseError(#"{"a":1,"\u0061":2}"#)?.kind == .duplicateKey)
        #expect(parseError(#"{"é":1,"\u00e9":2}"#)?.kind == .duplicateKey)
    }

    // MARK: Depth

    static func nestedArrays(_ depth: Int) -> String {
        String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
    }

    static func nestedObjects(_ depth: Int) -> String {
        String(repeating: #"{"a":"#, count: depth) + "1" + String(repeating: "}", count: depth)
    }

    @Test("nesting up to maxDepth is accepted; one more level is rejected where it starts")
    func depthLimit() throws {
        let limit = JSONParser.Limits().maxDepth
        #expect(limit == 64)
        _ = try JSONParser.parse(Self.nestedArrays(limit))
        _ = try JSONParser.parse(Self.nestedObjects(limit))
        let arrays = parseError(Self.nestedArrays(limit + 1))
        #expect(arrays?.kind == .depthLimitExceeded)
        #expect(arrays?.offset == limit)
        let objects = parseError(Self.nestedObjects(limit + 1))
        #expect(objects?.kind == .depthLimitExceeded)
        #expect(objects?.offset == 5 * limit)
        // Mixed nesting counts both kinds.
        let mixed = String(repeating: #"[{"a":"#, count: 32) + "[]" + String(repeating: "}]", count: 32)
        #expect(parseError(mixed)?.kind == .depthLimitExceeded)
    }

    @Test("custom limits, including zero and values above the supported ceiling")
    func customDepthLimits() throws {
        #expect(try JSONParser.parse("1", limits: .init(maxDepth: 0)) == 1)
        #expect(parseError("[]", limits: .init(maxDepth: 0))?.kind == .depthLimitExceeded)
        _ = try JSONParser.parse(Self.nestedArrays(3), limits: .init(maxDepth: 3))
        #expect(parseError(Self.nestedArrays(4), limits: .init(maxDepth: 3))?.offset == 3)

        let ceiling = JSONParser.Limits.maximumSupportedDepth
        let deep = try JSONParser.parse(Self.nestedArrays(ceiling), limits: .init(maxDepth: .max))
        #expect(deep.encoded().count == 2 * ceiling)
        let error = parseError(Self.nestedArrays(ceiling + 1), limits: .init(maxDepth: .max))
        #expect(error?.kind == .depthLimitExceeded)
        #expect(error?.offset == ceiling)
    }

    @Test("maxValues counts every value at any depth and fails at the first one over, where it starts")
    func valueLimit() throws {
        // [1,[2,{"a":3}]] holds six values: the outer array, 1, the inner array, 2, the object and 3.
        let text = #"[1,[2,{"a":3}]]"#
        _ = try JSONParser.parse(text, limits: .init(maxValues: 6))
        let error = parseError(text, limits: .init(maxValues: 5))
        #expect(error?.kind == .valueLimitExceeded)
        #expect(error?.offset == 11)
        #expect(error?.message.contains("more than 5 values") == true)
        // Keys are not values; nil means no limit.
        _ = try JSONParser.parse(#"{"a":1,"b":2}"#, limits: .init(maxValues: 3))
        let many = "[" + Array(repeating: "{}", count: 100_000).joined(separator: ",") + "]"
        _ = try JSONParser.parse(many)
        #expect(parseError(many, limits: .init(maxValues: 50_000))?.kind == .valueLimitExceeded)
    }

    @Test("a million open brackets fail promptly without exhausting the stack")
    func millionBrackets() {
        let bytes = [UInt8](repeating: UInt8(ascii: "["), count: 1_000_000)
        let clock = ContinuousClock()
        let start = clock.now
        let error = parseError(bytes)
        #expect(error?.kind == .depthLimitExceeded)
        #expect(error?.offset == 64)
        let unlimited = parseError(bytes, limits: .init(maxDepth: .max))
        #expect(unlimited?.kind == .depthLimitExceeded)
        #expect(clock.now - start < .seconds(2))
        let objects = Array(String(repeating: #"{"a":"#, count: 200_000).utf8)
        #expect(parseError(objects)?.kind == .depthLimitExceeded)
    }

    @Test("values at the depth limit can be compared, hashed and encoded")
    func deepValuesAreUsable() throws {
        let limits = JSONParser.Limits(maxDepth: JSONParser.Limits.maximumSupportedDepth)
        let text = Self.nestedObjects(limits.maxDepth)
        let a = try JSONParser.parse(text, limits: limits)
        let b = try JSONParser.parse(a.encoded(), limits: limits)
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a.jsonString == text)
        #expect(try JSONParser.parse(a.prettyPrinted(), limits: limits) == a)
    }

    // MARK: Robustness

    @Test("randomly mutated documents never crash; accepted ones round-trip, rejected ones point inside the input")
    func mutationFuzz() throws {
        var rng = SplitMix64(state: 2024)
        let seed = Array(
            #"{"a":[1,-2.5e3,"\u00e9\ud83d\ude00 é",true,false,null,{}],"b":{"c":"\n","d":[[]]},"e":"x"}"#.utf8)
        let alphabet = Array(#"{}[]",:\u0e-+.1 "#.utf8) + [0x00, 0x1F, 0x80, 0xC3, 0xED, 0xFF]
        var accepted = 0
        for _ in 0..<5_000 {
            var doc = seed
            for _ in 0..<Int.random(in: 1...3, using: &rng) where !doc.isEmpty {
                let position = Int.random(in: 0..<doc.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: doc[position] = UInt8.random(in: 0...255, using: &rng)
                case 1: doc.remove(at: position)
                default: doc.insert(alphabet.randomElement(using: &rng)!, at: position)
                }
            }
            do {
                let value = try JSONParser.parse(doc)
                accepted += 1
                #expect(try JSONParser.parse(value.encoded()) == value)
            } catch {
                #expect(error.offset >= 0 && error.offset <= doc.count)
                #expect(error.message.hasPrefix("invalid JSON at byte \(error.offset): "))
            }
        }
        #expect(accepted > 0)
    }
}
