// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// Prefixed identifiers in OpenAI's style: `resp_…`, `msg_…`, `fc_…`, `call_…`, `rs_…`.
///
/// Ids must be unique and unguessable enough not to collide across daemon restarts, but they are not secrets.
/// They are made from a process-wide random key (read once from the system generator) and a counter, mixed by
/// two bijective 64-bit mixers, so each id costs no system call (a `getrandom` per id showed up in profiles).
public enum ResponseID {
    private static let key: (UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next())
    }()

    private static let counter = Atomic<UInt64>(0)

    /// `prefix` followed by 24 lowercase hex digits, unique within the process.
    public static func make(_ prefix: String) -> String {
        let sequence = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let high = mix(sequence ^ key.0)
        let low = UInt32(truncatingIfNeeded: mix(sequence &+ key.1))
        return prefix + "_" + hex(high, digits: 16) + hex(UInt64(low), digits: 8)
    }

    /// SplitMix64's finalizer: a bijection on 64-bit values, so distinct counters give distinct ids.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private static func hex(_ value: UInt64, digits: Int) -> String {
        let text = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
