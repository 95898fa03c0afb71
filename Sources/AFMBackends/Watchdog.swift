// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Cuts off generations whose backend went silent, and those that ignore a cancel.
///
/// One thread for the whole process scans the live streams every 100 ms; a per-stream timer would cost a
/// kernel timer per token stream for an event that almost never happens. Each stream carries its own limits
/// (set by the registry that started it), so several registries in one process (tests) do not interfere.
final class Watchdog: Sendable {
    static let shared = Watchdog()

    private init() {
        let thread = Thread {
            while true {
                usleep(100_000)
                let now = ContinuousClock.now
                for stream in GenerationTable.shared.lookupAll() {
                    if case .expire(let terminal) = stream.watchdogCheck(now: now) {
                        stream.expire(with: terminal)
                    }
                }
            }
        }
        thread.name = "afm-watchdog"
        thread.start()
    }

    /// Makes sure the watchdog thread runs (the first call starts it).
    func ensureRunning() {}
}
