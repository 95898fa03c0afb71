// SPDX-License-Identifier: Apache-2.0

import AFMSystem
import Synchronization

/// The current `Date` field value, formatted at most once per second and shared by all connections.
final class HTTPDateCache: Sendable {
    private let cache = Mutex<(second: Int, bytes: [UInt8])>((-1, []))

    /// The IMF-fixdate for the current second.
    func current() -> [UInt8] {
        let now = SystemClock.unixSeconds()
        if let cached = cache.withLock({ $0.second == now ? $0.bytes : nil }) { return cached }
        let bytes = HTTPResponseEncoder.httpDate(unixSeconds: now)
        cache.withLock { $0 = (now, bytes) }
        return bytes
    }
}
