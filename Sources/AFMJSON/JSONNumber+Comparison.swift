// SPDX-License-Identifier: Apache-2.0

extension JSONNumber {
    /// Compares two numbers by their exact decimal values, read from their text: negative when `self` is smaller,
    /// zero when they are equal (`1`, `1.0` and `10e-1` are equal; so are `-0` and `0e5`), positive when `self` is
    /// larger.
    ///
    /// This is the rule for a schema's `enum`, `const` and bounds: through a `Double`, 9007199254740993 equals
    /// 9007199254740992, `0.10000000000000000001` equals `0.1`, and `1e400` equals `2e400` (both infinite), so a
    /// value just past a bound would pass it. Exponents of any length are exact too: `-1e-99999999999999999999` is
    /// below 0 (as a `Double` it is -0.0), and `10e99999999999999999999` equals `1e100000000000000000000`.
    public func compareValue(to other: JSONNumber) -> Int {
        if literal == other.literal { return 0 }
        // The common case, two integers that fit an Int64, without taking the text apart.
        if isInteger, other.isInteger, let x = int64Value, let y = other.int64Value { return x < y ? -1 : (x > y ? 1 : 0) }
        let (a, b) = (Self.decimal(literal), Self.decimal(other.literal))
        // Zero has no digits and no sign.
        if a.digits.isEmpty || b.digits.isEmpty {
            if a.digits.isEmpty && b.digits.isEmpty { return 0 }
            return a.digits.isEmpty ? (b.negative ? 1 : -1) : (a.negative ? -1 : 1)
        }
        if a.negative != b.negative { return a.negative ? -1 : 1 }
        let magnitude = Self.compareMagnitudes(a, b)
        return a.negative ? -magnitude : magnitude
    }

    /// Whether both numbers have the same exact value (``compareValue(to:)`` is 0).
    public func hasSameValue(as other: JSONNumber) -> Bool { compareValue(to: other) == 0 }

    /// A number's exact value as sign, significant digits (no leading or trailing zeros: empty for zero) and the
    /// order of its leading digit: the written exponent `exponent` (any length) plus `shift`, which the literal's own
    /// digits give (the digits before the point, minus the leading zeros of a fraction, …), so it is at most the
    /// literal's length and always fits an `Int`. Numbers of a larger order are larger in magnitude.
    private struct ExactDecimal {
        var negative: Bool
        var digits: [UInt8]
        var exponent: BigExponent
        var shift: Int
    }

    /// A written exponent, exactly: its sign and decimal digits (no leading zeros: empty for 0).
    private struct BigExponent {
        var negative: Bool
        var digits: [UInt8]

        /// The value when it has at most 18 digits (then any difference of two such fits an `Int`).
        var small: Int? {
            guard digits.count <= 18 else { return nil }
            let magnitude = digits.reduce(0) { $0 * 10 + Int($1) }
            return negative ? -magnitude : magnitude
        }
    }

    private static func decimal(_ literal: String) -> ExactDecimal {
        var bytes = Array(literal.utf8)[...]
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var exponent = BigExponent(negative: false, digits: [])
        if let e = bytes.firstIndex(where: { $0 | 0x20 == UInt8(ascii: "e") }) {
            var text = bytes[(e + 1)...]
            exponent.negative = text.first == UInt8(ascii: "-")
            if text.first == UInt8(ascii: "-") || text.first == UInt8(ascii: "+") { text = text.dropFirst() }
            exponent.digits = text.drop { $0 == UInt8(ascii: "0") }.map { $0 - UInt8(ascii: "0") }
            if exponent.digits.isEmpty { exponent.negative = false }
            bytes = bytes[..<e]
        }
        var digits: [UInt8] = []
        digits.reserveCapacity(bytes.count)
        var fractionDigits = 0
        var inFraction = false
        for byte in bytes {
            if byte == UInt8(ascii: ".") {
                inFraction = true
                continue
            }
            if digits.isEmpty && byte == UInt8(ascii: "0") {
                if inFraction { fractionDigits += 1 }
                continue
            }
            digits.append(byte)
            if inFraction { fractionDigits += 1 }
        }
        var trailingZeros = 0
        while digits.last == UInt8(ascii: "0") {
            digits.removeLast()
            trailingZeros += 1
        }
        // The leading digit's order: the digits' last place (exponent - fractionDigits + trailingZeros) plus the count.
        return ExactDecimal(
            negative: negative && !digits.isEmpty, digits: digits, exponent: exponent,
            shift: trailingZeros + digits.count - fractionDigits)
    }

    /// Compares the magnitudes of two non-zero decimals: the order of the leading digit first, then the digits.
    private static func compareMagnitudes(_ a: ExactDecimal, _ b: ExactDecimal) -> Int {
        // a.exponent + a.shift against b.exponent + b.shift, that is a.exponent - b.exponent against b.shift - a.shift
        // (both shifts are bounded by their literals' lengths: no overflow).
        let shifts = b.shift - a.shift
        let order: Int
        switch difference(a.exponent, b.exponent) {
        case .exactly(let exponents): order = exponents < shifts ? -1 : (exponents > shifts ? 1 : 0)
        case .beyond(let sign): order = sign  // further apart than any literal's length
        }
        if order != 0 { return order }
        for (x, y) in zip(a.digits, b.digits) where x != y { return x < y ? -1 : 1 }
        return a.digits.count == b.digits.count ? 0 : (a.digits.count < b.digits.count ? -1 : 1)
    }

    private enum Difference {
        /// The difference, when it is below 10^18 in magnitude.
        case exactly(Int)
        /// Its sign, when it is larger.
        case beyond(Int)
    }

    /// `a - b`, exactly when it is small, else its sign.
    private static func difference(_ a: BigExponent, _ b: BigExponent) -> Difference {
        if let x = a.small, let y = b.small { return .exactly(x - y) }
        // At least one has 19 digits or more: with opposite signs the difference is at least 10^18.
        if a.negative != b.negative { return .beyond(a.negative ? -1 : 1) }
        // The same sign: |a| - |b|, digit by digit, then the sign flipped for two negatives.
        let larger = compareDigits(a.digits, b.digits)
        guard larger != 0 else { return .exactly(0) }
        let (big, small) = larger > 0 ? (a.digits, b.digits) : (b.digits, a.digits)
        var result = [UInt8](repeating: 0, count: big.count)
        var borrow = 0
        for offset in 0..<big.count {
            let i = big.count - 1 - offset
            let j = small.count - 1 - offset
            var digit = Int(big[i]) - borrow - (j >= 0 ? Int(small[j]) : 0)
            borrow = digit < 0 ? 1 : 0
            if digit < 0 { digit += 10 }
            result[i] = UInt8(digit)
        }
        let magnitude = BigExponent(negative: false, digits: Array(result.drop { $0 == 0 }))
        let sign = larger * (a.negative ? -1 : 1)
        guard let value = magnitude.small else { return .beyond(sign) }
        return .exactly(sign * value)
    }

    /// Compares two magnitudes written as digits without leading zeros.
    private static func compareDigits(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.count != b.count { return a.count < b.count ? -1 : 1 }
        for (x, y) in zip(a, b) where x != y { return x < y ? -1 : 1 }
        return 0
    }
}
