// SPDX-License-Identifier: Apache-2.0
import AFMCore
import Synchronization

/// Bounds the work each backend is given: at most `MaxConcurrent` requests run, at most `MaxQueued` more wait
/// for a slot, in arrival order, and anything beyond both is refused at once with 503 `busy` and `Retry-After`.
///
/// ```
/// admit(backend) ─┬─ a slot free ───────────────► .admitted(ticket)            (no wait, no task)
///                 ├─ queue has room ─► .queued(waiter) ─ await ─► ticket     (a release hands its slot over)
///                 └─ both full ─────► .refused(busy, Retry-After)
/// ticket.release() ─► the first waiter gets the slot, or the slot is freed
/// ```
/// `[Backend.<id>] MaxConcurrent=0` (the default) admits everything at once: the backend's own limits apply and
/// afmd queues nothing. Queues are per backend, so one saturated backend never holds up another's requests.
public final class AdmissionControl: Sendable {
    /// The limits of one backend.
    public struct Limits: Sendable, Hashable {
        /// Requests that may run at once; 0 means no limit (and then nothing ever queues).
        public var maxConcurrent: Int
        /// Requests that may wait for a slot beyond those.
        public var maxQueued: Int

        public init(maxConcurrent: Int = 0, maxQueued: Int = 0) {
            self.maxConcurrent = maxConcurrent
            self.maxQueued = maxQueued
        }
    }

    /// What ``admit(backend:)`` decided.
    public enum Decision: Sendable {
        /// Run now.
        case admitted(Ticket)
        /// Wait for a slot: ``Waiter/wait()``.
        case queued(Waiter)
        /// Refused at once (503 `busy` with `Retry-After`).
        case refused(AFMError)
    }

    /// Running and waiting counts of one backend, for `/metrics` and `/status`.
    public struct Load: Sendable, Hashable {
        public var running: Int
        public var waiting: Int
        public var limits: Limits
    }

    private struct Lane {
        var limits = Limits()
        var running = 0
        /// Waiters in arrival order. A place is taken by ``admit(backend:)`` (no continuation yet) and filled in
        /// when its task starts waiting, so the queue bound holds however the two race.
        var waiting: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>?)] = []

        var hasFreeSlot: Bool { limits.maxConcurrent == 0 || running < limits.maxConcurrent }
    }

    private struct State {
        var lanes: [String: Lane] = [:]
        var nextWaiter: UInt64 = 0
        /// Waiters given a slot (true) or cancelled (false) before their task started waiting.
        var decidedEarly: [UInt64: Bool] = [:]

        /// Hands a slot to the first waiter of `backend`; returns its continuation to resume with true.
        mutating func grantFirst(of backend: String) -> CheckedContinuation<Bool, Never>? {
            guard let first = lanes[backend]?.waiting.first else { return nil }
            // The force unwrap is safe: the lane exists (its first waiter was just read).
            lanes[backend]!.waiting.removeFirst()
            if let continuation = first.continuation { return continuation }
            decidedEarly[first.id] = true
            return nil
        }
    }

    private enum AdmitOutcome { case admitted, queued(UInt64), refused(Lane) }

    private let state = Mutex(State())
    /// The `Retry-After` of a refusal, in seconds.
    public static let retryAfterSeconds = 1

    public init() {}

    /// Replaces every backend's limits (start and reload). A backend not named gets no limit. Waiters already
    /// queued stay; raised limits let them in now, lowered ones apply as running requests end.
    public func setLimits(_ limits: [String: Limits]) {
        let woken = state.withLock { state -> [CheckedContinuation<Bool, Never>] in
            var woken: [CheckedContinuation<Bool, Never>] = []
            for id in Set(state.lanes.keys).union(limits.keys) {
                state.lanes[id, default: Lane()].limits = limits[id] ?? Limits()
                // No copy of the lane is held across grantFirst (it would make removeFirst() copy the queue).
                while state.lanes[id].map({ !$0.waiting.isEmpty && $0.hasFreeSlot }) == true {
                    state.lanes[id]!.running += 1  // safe: the condition just read the lane
                    if let continuation = state.grantFirst(of: id) { woken.append(continuation) }
                }
            }
            return woken
        }
        for continuation in woken { continuation.resume(returning: true) }
    }

    /// Admits one request for `backend`: a slot now, a place in its queue, or a refusal.
    public func admit(backend: String) -> Decision {
        let outcome = state.withLock { state -> AdmitOutcome in
            // The lane is changed in place (one lookup, no copy of its waiters taken out and stored back).
            var nextWaiter = state.nextWaiter
            defer { state.nextWaiter = nextWaiter }
            return Self.admit(&state.lanes[backend, default: Lane()], nextWaiter: &nextWaiter)
        }
        switch outcome {
        case .admitted:
            return .admitted(Ticket(control: self, backend: backend))
        case .queued(let id):
            return .queued(Waiter(control: self, backend: backend, id: id))
        case .refused(let lane):
            return .refused(
                AFMError(
                    .busy,
                    "The backend '\(backend)' is busy: \(lane.running) requests running and \(lane.waiting.count) waiting, "
                        + "its limits (MaxConcurrent=\(lane.limits.maxConcurrent), MaxQueued=\(lane.limits.maxQueued)). Retry later.",
                    retryAfterSeconds: Self.retryAfterSeconds))
        }
    }

    private static func admit(_ lane: inout Lane, nextWaiter: inout UInt64) -> AdmitOutcome {
        if lane.hasFreeSlot {
            lane.running += 1
            return .admitted
        }
        guard lane.waiting.count < lane.limits.maxQueued else { return .refused(lane) }
        nextWaiter += 1
        lane.waiting.append((nextWaiter, nil))
        return .queued(nextWaiter)
    }

    /// The load of every backend that has limits or has had requests.
    public var load: [String: Load] {
        state.withLock { state in
            state.lanes.mapValues { Load(running: $0.running, waiting: $0.waiting.count, limits: $0.limits) }
        }
    }

    /// Starts waiting in the place ``admit(backend:)`` took; resumed with true when it holds a slot, false when
    /// it was cancelled.
    fileprivate func enqueue(backend: String, id: UInt64, continuation: CheckedContinuation<Bool, Never>) {
        let decided = state.withLock { state -> Bool? in
            if let decided = state.decidedEarly.removeValue(forKey: id) { return decided }
            guard let index = state.lanes[backend]?.waiting.firstIndex(where: { $0.id == id }) else { return false }
            state.lanes[backend]!.waiting[index].continuation = continuation  // safe: the index came from this lane
            return nil
        }
        if let decided { continuation.resume(returning: decided) }
    }

    /// Takes a cancelled waiter out of its queue (resumed with false); nothing when it already got its slot.
    fileprivate func cancel(backend: String, id: UInt64) {
        let continuation = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.lanes[backend]?.waiting.firstIndex(where: { $0.id == id }) else { return nil }
            let entry = state.lanes[backend]!.waiting.remove(at: index)  // safe: the index came from this lane
            if entry.continuation == nil { state.decidedEarly[id] = false }
            return entry.continuation
        }
        continuation?.resume(returning: false)
    }

    /// Gives a slot back: the first waiter takes it over (running stays), or it is freed.
    fileprivate func release(backend: String) {
        let next = state.withLock { state -> CheckedContinuation<Bool, Never>? in
            guard let index = state.lanes.index(forKey: backend) else { return nil }
            // Only what is needed is read into locals: a copy of the lane would be a second reference to its
            // waiters, and grantFirst's removeFirst() would then copy the whole queue on every release.
            let hasWaiters = !state.lanes.values[index].waiting.isEmpty
            let running = state.lanes.values[index].running
            let maxConcurrent = state.lanes.values[index].limits.maxConcurrent
            // Over the limit (it was lowered): free the slot rather than pass it on.
            if hasWaiters, maxConcurrent == 0 || running <= maxConcurrent {
                return state.grantFirst(of: backend)
            }
            // In place through the index found above: no second lookup.
            state.lanes.values[index].running = max(0, running - 1)
            return nil
        }
        next?.resume(returning: true)
    }

    /// A held slot. Release it once the response ended; a ticket dropped without a release frees its slot too.
    public final class Ticket: Sendable {
        private let control: AdmissionControl
        private let backend: String
        private let released = Atomic<Bool>(false)

        fileprivate init(control: AdmissionControl, backend: String) {
            self.control = control
            self.backend = backend
        }

        /// Frees the slot (once; later calls do nothing).
        public func release() {
            guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
            control.release(backend: backend)
        }

        deinit { release() }
    }

    /// A place in a backend's queue.
    public struct Waiter: Sendable {
        fileprivate let control: AdmissionControl
        fileprivate let backend: String
        fileprivate let id: UInt64

        /// Waits for a slot; nil when the waiting task was cancelled first (the client left).
        public func wait() async -> Ticket? {
            let control = self.control
            let backend = self.backend
            let id = self.id
            let admitted = await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    control.enqueue(backend: backend, id: id, continuation: continuation)
                }
            } onCancel: {
                control.cancel(backend: backend, id: id)
            }
            return admitted ? Ticket(control: control, backend: backend) : nil
        }
    }
}
