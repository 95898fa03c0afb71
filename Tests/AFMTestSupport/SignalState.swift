// SPDX-License-Identifier: Apache-2.0
import Foundation
import Glibc

/// Signal masks of test processes: starting a program from a thread that blocks signals, and reading what a running
/// process blocks.
public enum SignalState {
    /// Runs `body` with `signals` blocked in the calling thread, as libdispatch's worker threads have them, so a process
    /// that `body` starts inherits that mask whichever thread the test runs on. The thread's mask is restored after.
    public static func withBlocked<R>(_ signals: [Int32], _ body: () throws -> R) rethrows -> R {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &set, &previous)
        defer { pthread_sigmask(SIG_SETMASK, &previous, nil) }
        return try body()
    }

    /// The signals blocked in a process's main thread (`SigBlk` in `/proc/<pid>/status`: bit n-1 is signal n), or
    /// nil when the process is gone.
    public static func blocked(in pid: Int32) -> UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("SigBlk:") {
            return UInt64(line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        return nil
    }

    /// `signals` as a mask in the form ``blocked(in:)`` returns.
    public static func mask(_ signals: [Int32]) -> UInt64 {
        signals.reduce(0) { $0 | UInt64(1) << UInt64($1 - 1) }
    }
}
