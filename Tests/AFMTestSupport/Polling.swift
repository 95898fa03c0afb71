// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Polls `condition` every 5 ms until it holds or `seconds` pass; returns whether it held.
///
/// For conditions another process makes true (a daemon restarting a backend, a file appearing): tests wait for
/// the state, never for a fixed time.
public func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        usleep(5_000)
    }
    return condition()
}
