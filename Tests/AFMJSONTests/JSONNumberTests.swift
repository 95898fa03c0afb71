// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

/// A literal and everything `JSONNumber` should say about it.
struct NumberCase: Sendable, CustomTestStringConvertible {
    let literal: String
    let int64: Int64?
    let isInteger: Bool
    let double: Double

    var testDescription: String { literal }
}

@Suite("JSONNumber")
struct JSONNumberTests {
    static let cases: [NumberCase] = [
        NumberCase(literal: "0", int64: 0, isInteger: true, double: 0),
        NumberCase(literal: "-0", int64: 0, isInteger: true, double: -0.0),
        NumberCase(literal: "7", int64: 7, isInteger: true, double: 7),
        NumberCase(literal: "-42", int64: -42, isInteger: true, double: -42),
        NumberCase(literal: "9007199254740993", int64: 9_007_199_254_740_993, isInteger: true, double: 9_007_199_254_740_992),
        NumberCase(literal: "9223372036854775807", int64: .max, isInteger: true, double: 9.223372036854775807e18),
        NumberCase(literal: "-9223372036854775808", int64: .min, isInteger: true, double: -9.223372036854775808e18),
        NumberCase(literal: "9223372036854775808", int64: nil, isInteger: true, double: 9.223372036854775808e18),
        NumberCase(literal: "-9223372036854775809", int64: nil, isInteger: true, double: -9.223372036854775809e18),
        NumberCase(literal: "18446744073709551616", int64: nil, isInteger: true, double: 1.8446744073709551616e19),
        NumberCase(
            literal: "123456789012345678901234567890", int64: nil, isInteger: true, double: 1.2345678901234568e29),
        NumberCase(literal: "1e2", int64: 100, isInteger: false, double: 100),
        NumberCase(literal: "1E+2", int64: 100, isInteger: false, double: 100),
        NumberCase(literal: "-3e0", int64: -3, isInteger: false, double: -3),
        NumberCase(literal: "120e-1", int64: 12, isInteger: false, double: 12),
        NumberCase(literal: "15e-1", int64: nil, isInteger: false, double: 1.5),
        NumberCase(literal: "9e18", int64: 9_000_000_000_000_000_000, isInteger: false, double: 9e18),
        NumberCase(literal: "1e19", int64: nil, isInteger: false, double: 1e19),
        NumberCase(literal: "92233720368547758070e-1", int64: .max, isInteger: false, double: 9.223372036854775807e18),
        NumberCase(literal: "0e999999999999999999999", int64: 0, isInteger: false, double: 0),
        NumberCase(literal: "1.0", int64: nil, isInteger: false, double: 1),
        NumberCase(literal: "1.5", int64: nil, isInteger: false, double: 1.5),
        NumberCase(literal: "-0.0", int64: nil, isInteger: false, double: -0.0),
        NumberCase(literal: "0.1", int64: nil, isInteger: false, double: 0.1),
        NumberCase(literal: "2.5E-3", int64: nil, isInteger: false, double: 0.0025),
        NumberCase(literal: "1e999", int64: nil, isInteger: false, double: .infinity),
        NumberCase(literal: "-1e999", int64: nil, isInteger: false, double: -.infinity),
        NumberCase(literal: "1e-999", int64: nil, isInteger: false, double: 0),
        NumberCase(literal: "1e99999999999999999999", int64: nil, isInteger: false, double: .infinity),
    ]

    @Test("exact conversions follow the documented rules", arguments: cases)
    func conversions(_ sample: NumberCase) throws {
        let number = try #require(JSONNumber(literal: sample.literal))
        #expect(number.literal == sample.literal)
        #expect(number.description == sample.literal)
        #expect(number.int64Value == sample.int64)
        #expect(number.intValue == sample.int64.map(Int.init))
        #expect(number.isInteger == sample.isInteger)
        #expect(number.doubleValue == sample.double)
        #expect(number.doubleValue.sign == sample.double.sign)
    }

    @Test("parsed numbers keep their literal and re-encode byte for byte", arguments: cases)
    func parsedLiteralRoundTrip(_ sample: NumberCase) throws {
        let document = "[\(sample.literal),{\"n\":\(sample.literal)}]"
        let value = try JSONParser.parse(document)
        #expect(value[0]?.numberValue?.literal == sample.literal)
        #expect(value.jsonString == document)
    }

    @Test(
        "literals outside the grammar are rejected",
        arguments: [
            "", " 1", "1 ", "01", "-01", "+1", "NaN", "Infinity", "-Infinity", "1.", ".1", "-", "1e", "1e+", "1.e3",
            "0x1", "1_000", "١", "1,5", "--1", "1e1.5", "\u{0}1",
        ])
    func invalidLiterals(_ literal: String) {
        #expect(JSONNumber(literal: literal) == nil)
    }

    @Test("integers convert to their decimal literal")
    func integers() {
        #expect(JSONNumber(0).literal == "0")
        #expect(JSONNumber(-17).literal == "-17")
        #expect(JSONNumber(Int.min).literal == "-9223372036854775808")
        #expect(JSONNumber(Int.min).intValue == .min)
        #expect(JSONNumber(Int64.max).int64Value == .max)
        #expect(JSONNumber(UInt64.max).literal == "18446744073709551615")
        #expect(JSONNumber(UInt64.max).int64Value == nil)
        let literal: JSONNumber = 12
        #expect(literal.literal == "12")
    }

    @Test(
        "doubles use the shortest literal that reads back exactly",
        arguments: [
            (0.1, "0.1"), (1.0, "1.0"), (-0.0, "-0.0"), (1e20, "1e+20"), (Double.leastNonzeroMagnitude, "5e-324"), (123.456, "123.456"),
            (Double.greatestFiniteMagnitude, "1.7976931348623157e+308"), (-2.5e-8, "-2.5e-08"),
        ])
    func doubles(value: Double, literal: String) throws {
        let number = JSONNumber(value)
        #expect(number.literal == literal)
        #expect(JSONNumber(literal: number.literal) != nil)
        #expect(number.doubleValue == value)
        #expect(number.doubleValue.sign == value.sign)
        #expect(JSONNumber(exactly: value) == number)
    }

    @Test("random doubles produce valid literals that round-trip")
    func randomDoubles() throws {
        var rng = SplitMix64(state: 7)
        for _ in 0..<2_000 {
            let value = Double(bitPattern: rng.next())
            guard value.isFinite else {
                #expect(JSONNumber(exactly: value) == nil)
                continue
            }
            let number = try #require(JSONNumber(exactly: value))
            #expect(JSONNumber(literal: number.literal) == number)
            #expect(number.doubleValue == value)
        }
    }

    @Test("NaN and infinities are not representable")
    func nonFinite() {
        #expect(JSONNumber(exactly: .nan) == nil)
        #expect(JSONNumber(exactly: .infinity) == nil)
        #expect(JSONNumber(exactly: -.infinity) == nil)
        #expect(JSONNumber(exactly: 2.5)?.literal == "2.5")
    }

    @Test("equality and hashing compare the literal text")
    func equalityIsLiteral() throws {
        let one = try #require(JSONNumber(literal: "1"))
        let oneAgain = try #require(JSONNumber(literal: "1"))
        let onePointZero = try #require(JSONNumber(literal: "1.0"))
        let exponent = try #require(JSONNumber(literal: "1e0"))
        #expect(one == oneAgain)
        #expect(one.hashValue == oneAgain.hashValue)
        #expect(one == JSONNumber(1))
        #expect(one != onePointZero)
        #expect(one != exponent)
        #expect(one.doubleValue == onePointZero.doubleValue)
        #expect(Set([one, oneAgain, onePointZero, exponent]).count == 3)
    }

    /// Numbers compare by exact decimal value, read from their text: what a Double cannot tell apart is ordered, and
    /// spellings of one value are equal.
    @Test func valuesCompareExactly() throws {
        func number(_ text: String) throws -> JSONNumber { try #require(JSONNumber(literal: text)) }
        let ascending = [
            "-1e100000000000000000000", "-1e99999999999999999999", "-1e400", "-9007199254740993", "-9007199254740992",
            "-0.30000000000000000001", "-1e-400", "-1e-99999999999999999999", "0", "1e-100000000000000000000",
            "1e-99999999999999999999", "1e-400", "0.09999999999999999999", "0.1", "0.10000000000000000001", "1",
            "9007199254740992", "9007199254740992.5", "9007199254740993", "1e400", "2e400", "1e9223372036854775807",
            "1e9223372036854775808", "1e99999999999999999999", "1.5e99999999999999999999", "1e100000000000000000000",
        ]
        for (i, a) in ascending.enumerated() {
            for (j, b) in ascending.enumerated() {
                let order = try number(a).compareValue(to: try number(b))
                #expect(order.signum() == (i < j ? -1 : (i > j ? 1 : 0)), "\(a) vs \(b): \(order)")
            }
        }
        for (a, b) in [
            ("1", "1.0"), ("100", "1e2"), ("0.1", "10e-2"), ("-0", "0"), ("0e9", "0.000"), ("12.50", "125e-1"), ("1E+2", "100"),
            ("10e99999999999999999999", "1e100000000000000000000"), ("0e99999999999999999999", "-0"),
            ("-0.0e-99999999999999999999", "0"), ("0.01e-99999999999999999998", "1e-100000000000000000000"),
            ("1e0000000000000000000000000002", "100"),
        ] {
            #expect(try number(a).compareValue(to: try number(b)) == 0, "\(a) = \(b)")
            #expect(try number(a).hasSameValue(as: try number(b)), "\(a) = \(b)")
        }
        // Exponents beyond an Int are exact too (they were compared as Doubles: -1e-99999999999999999999 was -0.0, so
        // not below a minimum of 0, and 10e99999999999999999999 was not the same value as 1e100000000000000000000).
        #expect(try !number("1e99999999999999999999").hasSameValue(as: try number("2e99999999999999999999")))
        #expect(try number("1e99999999999999999999").compareValue(to: try number("5")) > 0)
    }
}
