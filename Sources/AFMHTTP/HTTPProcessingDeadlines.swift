// SPDX-License-Identifier: Apache-2.0

import AFMSystem
import Synchronization

/// The processing deadline and its grace in force (``HTTPServer/Configuration/processingDeadline``,
/// ``HTTPServer/Configuration/processingDeadlineGrace``), in monotonic nanoseconds.
///
/// One per server, shared by the cores of its successive starts, and changed while it serves by
/// ``HTTPServer/setProcessingDeadline(_:grace:)``: afmd's grace follows the backends' cancel grace, which a reload
/// may change. Each loop reads both at every sweep, so a change applies to requests already running too.
final class HTTPProcessingDeadlines: Sendable {
    private let deadline: Atomic<UInt64>
    private let grace: Atomic<UInt64>

    init(deadline: Duration, grace: Duration) {
        self.deadline = Atomic(SystemClock.nanoseconds(deadline))
        self.grace = Atomic(SystemClock.nanoseconds(grace))
    }

    /// How long a handler may run.
    var deadlineNanoseconds: UInt64 { deadline.load(ordering: .relaxed) }
    /// How long a handler cancelled by the deadline may still end its stream.
    var graceNanoseconds: UInt64 { grace.load(ordering: .relaxed) }

    func set(deadline: Duration, grace: Duration) {
        self.deadline.store(SystemClock.nanoseconds(deadline), ordering: .relaxed)
        self.grace.store(SystemClock.nanoseconds(grace), ordering: .relaxed)
    }
}
