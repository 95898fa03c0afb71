// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Synchronization

/// Per-request limits the host enforces on a backend.
public struct GenerationLimits: Sendable, Hashable {
    /// A backend silent for this long (no event at all) has its generation failed with `timeout`.
    public var silenceLimit: Duration
    /// A backend that has not ended a cancelled generation after this long is cut off.
    public var cancelGrace: Duration

    public init(silenceLimit: Duration = .seconds(300), cancelGrace: Duration = .seconds(5)) {
        self.silenceLimit = silenceLimit
        self.cancelGrace = cancelGrace
    }
}

/// The cancel grace in force, shared by a registry and every stream it started: a reload that changes
/// `CancelGraceSeconds` changes it for the streams already running too. afmd's processing-deadline grace, which the
/// HTTP server applies to running requests as well, is derived from it (the cancel grace plus a second): were a
/// running stream's watchdog to keep the grace of its start, a reload that shortens it would have the connection cut
/// before the watchdog ends a backend that ignores the cancel, and the client would get no failure event.
final class SharedCancelGrace: Sendable {
    private let nanoseconds: Atomic<UInt64>

    init(_ grace: Duration) {
        nanoseconds = Atomic(SystemClock.nanoseconds(grace))
    }

    /// The grace now.
    var value: Duration { .nanoseconds(Int64(clamping: nanoseconds.load(ordering: .relaxed))) }

    func set(_ grace: Duration) {
        nanoseconds.store(SystemClock.nanoseconds(grace), ordering: .relaxed)
    }
}
