// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Parses `bytes` and returns the error, or `nil` if the document was accepted.
func parseError(_ bytes: [UInt8], limits: JSONParser.Limits = .init()) -> JSONParseError? {
    do {
        _ = try JSONParser.parse(bytes, limits: limits)
        return nil
    } catch {
        return error
    }
}

/// Parses `text` and returns the error, or `nil` if the document was accepted.
func parseError(_ text: String, limits: JSONParser.Limits = .init()) -> JSONParseError? {
    parseError(Array(text.utf8), limits: limits)
}

/// A small deterministic generator (SplitMix64), so randomized tests are reproducible.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Random JSON values covering every case, including strings with control characters, quotes,
/// backslashes and non-ASCII scalars from every UTF-8 length.
enum RandomJSON {
    static let scalarPool: [Unicode.Scalar] = [
        "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "\u{7F}", "é", "€", "\u{2028}",
        "\u{FFFF}", "😀", "\u{10FFFF}", "\u{D7FF}", "\u{E000}",
    ]

    static func string(_ rng: inout SplitMix64) -> String {
        var result = String.UnicodeScalarView()
        for _ in 0..<Int.random(in: 0...24, using: &rng) {
            result.append(scalarPool.randomElement(using: &rng)!)
        }
        return String(result)
    }

    static func number(_ rng: inout SplitMix64) -> JSONNumber {
        switch Int.random(in: 0..<4, using: &rng) {
        case 0: return JSONNumber(Int64.random(in: .min ... .max, using: &rng))
        case 1: return JSONNumber(Double.random(in: -1e300...1e300, using: &rng))
        case 2: return JSONNumber(literal: ["1e999", "-0", "0.10", "1E+2", "123456789012345678901234567890"]
            .randomElement(using: &rng)!)!
        default: return JSONNumber(Int.random(in: -1000...1000, using: &rng))
        }
    }

    static func value(_ rng: inout SplitMix64, depth: Int = 0) -> JSONValue {
        let kind = Int.random(in: 0..<(depth >= 5 ? 4 : 6), using: &rng)
        switch kind {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .number(number(&rng))
        case 3: return .string(string(&rng))
        case 4:
            return .array((0..<Int.random(in: 0...5, using: &rng)).map { _ in value(&rng, depth: depth + 1) })
        default:
            var object = JSONObject()
            for _ in 0..<Int.random(in: 0...20, using: &rng) {
                object[string(&rng)] = value(&rng, depth: depth + 1)
            }
            return .object(object)
        }
    }
}
