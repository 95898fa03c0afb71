// SPDX-License-Identifier: Apache-2.0

/// Random, prefixed identifiers in OpenAI's style: `resp_…`, `msg_…`, `fc_…`, `call_…`, `rs_…`.
public enum ResponseID {
    /// `prefix` followed by 24 random lowercase hex digits.
    public static func make(_ prefix: String) -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64
        let low = generator.next() as UInt32
        return prefix + "_" + hex(high, digits: 16) + hex(UInt64(low), digits: 8)
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
