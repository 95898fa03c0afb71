// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Wall-clock time as stored in databases: milliseconds since the Unix epoch.
public enum StoreClock {
    /// The current time in Unix milliseconds.
    public static func nowMilliseconds() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }
}
