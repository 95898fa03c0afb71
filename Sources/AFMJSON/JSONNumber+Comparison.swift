// SPDX-License-Identifier: Apache-2.0

extension JSONNumber {
    /// Compares two numbers by their exact decimal values, read from their text: negative when `self` is smaller,
    /// zero when they are equal (`1`, `1.0` and `10e-1` are equal; so are `-0` and `0e5`), positive when `self` is
    /// larger.
    ///
    /// This is the rule for a schema's `enum`, `const` and bounds: through a `Double`, 9007199254740993 equals
    /// 9007199254740992, `0.10000000000000000001` equals `0.1`, and `1e400` equals `2e400` (both infinite), so a
    /// value just past a bound would pass it. Only when an exponent is too large for an `Int` (`1e99999999999999999999`)
    /// are the two compared as `Double`s.
    public func compareValue(to other: JSONNumber) -> Int {
        if let order = exactOrder(other) { return order }
        let (x, y) = (doubleValue, other.doubleValue)
        return x < y ? -1 : (x > y ? 1 : 0)
    }

    /// Whether both numbers have the same exact value (``compareValue(to:)`` is 0). Two numbers whose exponents do
    /// not fit an `Int` are equal only when written alike.
    public func hasSameValue(as other: JSONNumber) -> Bool {
        exactOrder(other).map { $0 == 0 } ?? (literal == other.literal)
    }

    /// The exact comparison, or nil when an exponent does not fit an `Int`.
    private func exactOrder(_ other: JSONNumber) -> Int? {
        if literal == other.literal { return 0 }
        // The common case, two integers that fit an Int64, without taking the text apart.
        if isInteger, other.isInteger, let x = int64Value, let y = other.int64Value { return x < y ? -1 : (x > y ? 1 : 0) }
        guard let a = Self.decimal(literal), let b = Self.decimal(other.literal) else { return nil }
        // Zero has no digits and no sign.
        if a.digits.isEmpty || b.digits.isEmpty {
            if a.digits.isEmpty && b.digits.isEmpty { return 0 }
            return a.digits.isEmpty ? (b.negative ? 1 : -1) : (a.negative ? -1 : 1)
        }
        if a.negative != b.negative { return a.negative ? -1 : 1 }
        let magnitude = Self.compareMagnitudes(a, b)
        return a.negative ? -magnitude : magnitude
    }

    /// A number's exact value as sign, significant digits (no leading or trailing zeros: empty for zero) and the
    /// decimal exponent of the digits' last place; nil when the exponent does not fit an `Int`.
    private struct ExactDecimal {
        var negative: Bool
        var digits: [UInt8]
        var exponent: Int
        /// The exponent of the leading digit's place plus one: the number of digits before the decimal point when
        /// positive. Numbers with a larger order are larger in magnitude.
        var order: Int
    }

    private static func decimal(_ literal: String) -> ExactDecimal? {
        var bytes = Array(literal.utf8)[...]
        let negative = bytes.first == UInt8(ascii: "-")
        if negative { bytes = bytes.dropFirst() }
        var exponent = 0
        if let e = bytes.firstIndex(where: { $0 | 0x20 == UInt8(ascii: "e") }) {
            var text = bytes[(e + 1)...]
            let exponentNegative = text.first == UInt8(ascii: "-")
            if text.first == UInt8(ascii: "-") || text.first == UInt8(ascii: "+") { text = text.dropFirst() }
            var value = 0
            for digit in text {
                let (times, overflow1) = value.multipliedReportingOverflow(by: 10)
                let (sum, overflow2) = times.addingReportingOverflow(Int(digit - UInt8(ascii: "0")))
                guard !overflow1, !overflow2 else { return nil }
                value = sum
            }
            exponent = exponentNegative ? -value : value
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
        let (shifted, overflow) = exponent.subtractingReportingOverflow(fractionDigits)
        guard !overflow else { return nil }
        exponent = shifted
        while digits.last == UInt8(ascii: "0") {
            digits.removeLast()
            let (up, overflow) = exponent.addingReportingOverflow(1)
            guard !overflow else { return nil }
            exponent = up
        }
        guard !digits.isEmpty else { return ExactDecimal(negative: false, digits: [], exponent: 0, order: 0) }
        let (order, orderOverflow) = exponent.addingReportingOverflow(digits.count)
        guard !orderOverflow else { return nil }
        return ExactDecimal(negative: negative, digits: digits, exponent: exponent, order: order)
    }

    /// Compares the magnitudes of two non-zero decimals: the order of the leading digit first, then the digits.
    private static func compareMagnitudes(_ a: ExactDecimal, _ b: ExactDecimal) -> Int {
        if a.order != b.order { return a.order < b.order ? -1 : 1 }
        for (x, y) in zip(a.digits, b.digits) where x != y { return x < y ? -1 : 1 }
        return a.digits.count == b.digits.count ? 0 : (a.digits.count < b.digits.count ? -1 : 1)
    }
}
