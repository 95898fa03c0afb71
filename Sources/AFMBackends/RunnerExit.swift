// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// How a runner process ended, as its host reports it to the registry.
public struct RunnerExit: Sendable, Hashable {
    /// The exit status or signal (nil when it could not be collected).
    public var status: ChildExitStatus?
    /// Whether the host asked it to end (a retired generation); false for a crash.
    public var expected: Bool
    /// Why the host killed it, when it did: a hang caught by the watchdog, a call that timed out.
    public var killReason: String?

    /// "signal 11 (SIGSEGV)", "exit status 3", or "killed: <reason>".
    public var summary: String {
        let status = self.status.map(\.description) ?? "unknown status"
        return killReason.map { "\(status); killed by the host: \($0)" } ?? status
    }
}
