// SPDX-License-Identifier: Apache-2.0

/// A value bound to a statement parameter or read from a result column.
public enum SQLValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])
}

extension SQLValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByNilLiteral {
    public init(stringLiteral value: String) { self = .text(value) }
    public init(integerLiteral value: Int64) { self = .integer(value) }
    public init(nilLiteral: ()) { self = .null }

    /// `.text(value)`, or `.null` for nil.
    public static func optional(_ value: String?) -> SQLValue { value.map { .text($0) } ?? .null }

    /// `.integer(value)`, or `.null` for nil.
    public static func optional(_ value: Int64?) -> SQLValue { value.map { .integer($0) } ?? .null }
}
