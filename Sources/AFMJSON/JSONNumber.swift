// SPDX-License-Identifier: Apache-2.0

/// A JSON number, kept as the exact text it was written with.
///
/// JSON numbers have arbitrary precision, but `Double` and `Int64` do not. A gateway that converted every
/// number to `Double` would silently corrupt 64-bit IDs and seeds, and one that reformatted numbers would
/// change bytes it forwards. So a `JSONNumber` stores its literal unchanged, re-encodes it byte for byte,
/// and converts only when asked (``int64Value``, ``doubleValue``).
///
/// Equality and hashing compare the literal text: `1`, `1.0` and `1e0` are three different numbers. This
/// is the simple exact rule; compare ``doubleValue`` or ``int64Value`` when you want numeric equality.
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
    /// The number exactly as written in the source document (or as produced by an initializer). It always
    /// matches the RFC 8259 number grammar and is never reformatted.
    public private(set) var literal: String

    /// Wraps a literal that the caller has already checked against the grammar.
    @usableFromInline
    init(validatedLiteral: String) {
        self.literal = validatedLiteral
    }

    /// Creates a number from its JSON text, or returns `nil` if `literal` is not exactly one RFC 8259
    /// number (no surrounding whitespace, no leading `+`, no leading zeros, no `NaN`/`Infinity`).
    /// Arbitrarily long literals such as `1e999` are accepted.
    public init?(literal: String) {
        var text = literal
        let valid = text.withUTF8 { utf8 -> Bool in
            guard let base = utf8.baseAddress, !utf8.isEmpty else { return false }
            do {
                return try JSONNumber.scan(base, from: 0, end: utf8.count) == utf8.count
            } catch {
                return false
            }
        }
        guard valid else { return nil }
        self.literal = literal
    }

    /// Creates an integer number, for example `42` or `-7`.
    public init(_ value: Int) {
        self.literal = String(value)
    }

    /// Creates an integer number, for example `9223372036854775807`.
    public init(_ value: Int64) {
        self.literal = String(value)
    }

    /// Creates an integer number, for example `18446744073709551615`.
    public init(_ value: UInt64) {
        self.literal = String(value)
    }

    /// Creates a number from a finite `Double`, using the shortest literal that reads back as the same
    /// value (Swift's `description`: `0.1`, `1.0`, `1e+20`, `-0.0`, `5e-324`).
    ///
    /// - Precondition: `value.isFinite`. JSON has no NaN or infinity; use ``init(exactly:)`` when the value
    ///   may not be finite.
    public init(_ value: Double) {
        precondition(value.isFinite, "JSON cannot represent \(value); use JSONNumber(exactly:)")
        self.literal = value.description
    }

    /// Creates a number from a `Double`, or returns `nil` for NaN and ±infinity, which JSON cannot represent.
    public init?(exactly value: Double) {
        guard value.isFinite else { return nil }
        self.literal = value.description
    }

    /// The same as ``literal``.
    public var description: String { literal }

    /// Whether the literal is written as an integer: no fraction and no exponent (`-12`, but not `1.0` or
    /// `1e2`).
    public var isInteger: Bool {
        for byte in literal.utf8 where byte == UInt8(ascii: ".") || byte | 0x20 == UInt8(ascii: "e") {
            return false
        }
        return true
    }

    /// The exact integer value, or `nil` when there is none that fits in `Int64`.
    ///
    /// The rule is exactness, decided on the text (never through `Double`):
    /// - integer literals convert when they fit: `"9223372036854775807"` is `Int64.max`,
    ///   `"9223372036854775808"` is `nil`, `"-0"` is `0`;
    /// - a literal with a fraction part is `nil`, even when the fraction is zero (`"1.0"`, `"1.5"`), because
    ///   it was written as a non-integer;
    /// - a literal with an exponent but no fraction converts when its value is an exact integer that fits:
    ///   `"1e2"` is `100`, `"120e-1"` is `12`, `"0e999"` is `0`, but `"15e-1"` and `"1e19"` are `nil`.
    public var int64Value: Int64? {
        var text = literal
        return text.withUTF8 { JSONNumber.exactInt64(of: $0) }
    }

    /// The exact integer value as an `Int`, under the same rules as ``int64Value``.
    public var intValue: Int? {
        guard let value = int64Value else { return nil }
        return Int(exactly: value)
    }

    /// The nearest `Double` (correctly rounded). Literals beyond the `Double` range give `±infinity` (or
    /// `±0.0` for tiny ones); `"-0"` gives `-0.0`.
    public var doubleValue: Double {
        // Short integers are exact in a Double; skip the general decimal conversion for them.
        if literal.utf8.count <= 15, isInteger, let value = int64Value {
            return value == 0 && literal.utf8.first == UInt8(ascii: "-") ? -0.0 : Double(value)
        }
        // The literal is grammar-checked, and Swift's conversion accepts every JSON number.
        return Double(literal) ?? .nan
    }
}

extension JSONNumber: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    /// Creates an integer number from a literal, so `.number(42)` works.
    public init(integerLiteral value: Int) {
        self.init(value)
    }

    /// Creates a number from a floating-point literal, so `.number(0.5)` works (see ``init(_:)-(Double)``).
    public init(floatLiteral value: Double) {
        self.init(value)
    }
}

// MARK: - Grammar and conversion (internal)

extension JSONNumber {
    /// Checks the RFC 8259 number grammar starting at `start` and returns the index just past the number.
    /// Shared by the parser and ``init(literal:)`` so both accept exactly the same language.
    @inline(__always)
    static func scan(
        _ p: UnsafePointer<UInt8>, from start: Int, end: Int
    ) throws(JSONParseError) -> Int {
        var i = start
        if i < end, p[i] == UInt8(ascii: "-") { i += 1 }
        guard i < end else {
            throw JSONParseError(kind: .invalidNumber, offset: i, detail: "expected a digit after '-'")
        }
        let first = p[i]
        if first == UInt8(ascii: "0") {
            i += 1
            if i < end, isDigit(p[i]) {
                throw JSONParseError(
                    kind: .invalidNumber, offset: i - 1, detail: "leading zeros are not allowed in numbers")
            }
        } else if isDigit(first) {
            i += 1
            while i < end, isDigit(p[i]) { i += 1 }
        } else {
            throw JSONParseError(kind: .invalidNumber, offset: i, detail: "expected a digit in number")
        }
        if i < end, p[i] == UInt8(ascii: ".") {
            i += 1
            guard i < end, isDigit(p[i]) else {
                throw JSONParseError(
                    kind: .invalidNumber, offset: i, detail: "expected a digit after the decimal point")
            }
            i += 1
            while i < end, isDigit(p[i]) { i += 1 }
        }
        if i < end, p[i] | 0x20 == UInt8(ascii: "e") {
            i += 1
            if i < end, p[i] == UInt8(ascii: "+") || p[i] == UInt8(ascii: "-") { i += 1 }
            guard i < end, isDigit(p[i]) else {
                throw JSONParseError(kind: .invalidNumber, offset: i, detail: "expected a digit in the exponent")
            }
            i += 1
            while i < end, isDigit(p[i]) { i += 1 }
        }
        return i
    }

    @inline(__always)
    static func isDigit(_ byte: UInt8) -> Bool {
        byte &- UInt8(ascii: "0") < 10
    }

    /// The exact `Int64` value of a grammar-checked literal (see ``int64Value`` for the rules).
    static func exactInt64(of text: UnsafeBufferPointer<UInt8>) -> Int64? {
        var i = 0
        let n = text.count
        let negative = n > 0 && text[0] == UInt8(ascii: "-")
        if negative { i = 1 }
        let digitsStart = i
        while i < n, isDigit(text[i]) { i += 1 }
        let digitsEnd = i
        if i < n, text[i] == UInt8(ascii: ".") { return nil }

        // Exponent, saturated: anything beyond ±100000 behaves the same for a 19-digit result.
        var exponent = 0
        if i < n {  // text[i] is 'e' or 'E'
            i += 1
            var exponentNegative = false
            if text[i] == UInt8(ascii: "-") {
                exponentNegative = true
                i += 1
            } else if text[i] == UInt8(ascii: "+") {
                i += 1
            }
            while i < n {
                exponent = min(exponent * 10 + Int(text[i] &- UInt8(ascii: "0")), 100_000)
                i += 1
            }
            if exponentNegative { exponent = -exponent }
        }

        // Zero is exact whatever the exponent ("0e999", "-0").
        if digitsEnd - digitsStart == 1, text[digitsStart] == UInt8(ascii: "0") { return 0 }

        var significantEnd = digitsEnd
        if exponent < 0 {
            // A negative exponent must only remove trailing zeros, or the value has a fraction.
            var trailingZeros = 0
            var j = digitsEnd - 1
            while j >= digitsStart, text[j] == UInt8(ascii: "0") {
                trailingZeros += 1
                j -= 1
            }
            guard trailingZeros >= -exponent else { return nil }
            significantEnd -= -exponent
            exponent = 0
        }
        // Int64 has at most 19 digits; more significant digits cannot fit.
        guard significantEnd - digitsStart + exponent <= 19 else { return nil }

        var magnitude: UInt64 = 0
        for k in digitsStart..<significantEnd {
            magnitude = magnitude * 10 + UInt64(text[k] &- UInt8(ascii: "0"))  // ≤ 19 digits: no overflow
        }
        for _ in 0..<exponent {
            let (product, overflow) = magnitude.multipliedReportingOverflow(by: 10)
            guard !overflow else { return nil }
            magnitude = product
        }
        if negative {
            guard magnitude <= UInt64(Int64.max) + 1 else { return nil }
            return Int64(bitPattern: 0 &- magnitude)
        }
        guard magnitude <= UInt64(Int64.max) else { return nil }
        return Int64(magnitude)
    }
}
