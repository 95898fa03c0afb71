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

    /// `prefix`, `separator` and 24 lowercase hex digits, unique within the process.
    public static func make(_ prefix: String, separator: UInt8 = UInt8(ascii: "_")) -> String {
        let sequence = counter.wrappingAdd(1, ordering: .relaxed).newValue
        let high = mix(sequence ^ key.0)
        let low = UInt32(truncatingIfNeeded: mix(sequence &+ key.1))
        // One allocation: the prefix, "_" and 24 hex digits written straight into the string's storage.
        let prefixBytes = prefix.utf8.count
        return String(unsafeUninitializedCapacity: prefixBytes + 25) { buffer in
            var index = 0
            for byte in prefix.utf8 {
                buffer[index] = byte
                index += 1
            }
            buffer[index] = separator
            index += 1
            for shift in stride(from: 60, through: 0, by: -4) {
                buffer[index] = hexDigit(UInt8(truncatingIfNeeded: high >> UInt64(shift)) & 0xF)
                index += 1
            }
            for shift in stride(from: 28, through: 0, by: -4) {
                buffer[index] = hexDigit(UInt8(truncatingIfNeeded: low >> UInt32(shift)) & 0xF)
                index += 1
            }
            return index
        }
    }

    /// The lowercase hex digit of a value 0...15.
    private static func hexDigit(_ nibble: UInt8) -> UInt8 {
        nibble < 10 ? UInt8(ascii: "0") + nibble : UInt8(ascii: "a") + nibble - 10
    }

    /// SplitMix64's finalizer: a bijection on 64-bit values, so distinct counters give distinct ids.
    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value &+ 0x9E37_79B9_7F4A_7C15
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
