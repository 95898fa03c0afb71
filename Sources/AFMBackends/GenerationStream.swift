// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMSystem
import Dispatch
import Synchronization

/// The events of one generation, from the backend's `emit` calls to an async consumer.
///
/// ```
///  backend thread ──emit()──► [bounded buffer] ──next()──► Responses layer task ──► HTTP writer
///        ▲  blocks while full                                 │ slow client: write() suspends
///        └────────────── backpressure ◄──────────────────────-┘
/// ```
///
/// - The buffer holds at most `capacity` events. A backend that emits into a full buffer waits inside `emit`
///   until the consumer takes one, so a slow reader slows the backend instead of growing memory.
/// - Exactly one terminal event is delivered. Anything the backend emits after its terminal event is ignored.
/// - `cancel()` (client gone) makes every later `emit` return 1, wakes a blocked emitter, and asks the backend
///   to stop; terminal and usage events are still accepted so usage of cancelled generations is counted (usage
///   is cumulative: a newer usage event replaces a buffered one, so they cannot grow the buffer).
/// - The watchdog ends a generation whose backend goes silent (`expire`), synthesizing the terminal event.
/// - The generation ends (`onTerminal`: its lease is released, so its instance may be destroyed) only once the
///   terminal event arrived **and** no call into the backend for it is in flight: `generate` has returned and no
///   `cancel` is running. A terminal event emitted from inside `generate`, or racing a `cancel` on another thread,
///   therefore never lets `destroy` overlap that call (docs/ARCHITECTURE.md, "Instance lifetime").
public final class GenerationStream: Sendable, AsyncSequence {
    public typealias Element = BackendEvent

    /// Process-unique id; also the `ctx` value of the C event sink.
    public let id: UInt64
    let capacity: Int
    /// How long the backend may stay silent before the watchdog fails the generation with `timeout`.
    let silenceLimit: Duration
    private let silenceLimitNanoseconds: UInt64
    /// How long the backend may take to end the generation after `cancel()`: the registry's grace in force, which a
    /// reload may change while the stream runs (``SharedCancelGrace``).
    var cancelGrace: Duration { sharedCancelGrace.value }
    private let sharedCancelGrace: SharedCancelGrace
    private let state: Mutex<State>
    private let emitterWakeup = DispatchSemaphore(value: 0)
    private let onCancel: @Sendable () -> Void
    private let onTerminal: @Sendable (_ expired: Bool) -> Void
    /// Runner hosting: called with a count every `consumedBatch` events the consumer took (flow-control credit).
    private let onConsumed: (@Sendable (Int) -> Void)?
    /// How many consumed events make one `onConsumed` call.
    static let consumedBatch = 64

    struct State {
        var buffer: [BackendEvent] = []
        var head = 0
        var terminalReceived = false
        var terminalDelivered = false
        var cancelRequested = false
        /// When the cancel reached the backend (not when it was asked for: a cancel held back until `generate`
        /// returned gets its grace period from its delivery).
        var cancelDeliveredAt: ContinuousClock.Instant?
        var expired = false
        /// Calls into the backend for this generation that have not returned: 1 for `generate` from the stream's
        /// creation until `armCancel()`, plus each `cancel` being delivered.
        var callsInFlight = 1
        /// `onTerminal` ran (or is about to): the generation's bookkeeping ended.
        var ended = false
        /// False until `generate` returned: a cancel before that is held back and delivered by `armCancel()`,
        /// because a backend may not know the request id yet (the ABI forbids cancel before generate returns).
        var cancelArmed = false
        var cancelPending = false
        var emitterBlocked = false
        var waiter: CheckedContinuation<BackendEvent?, Never>?
        /// When the backend last sent an event (`SystemClock.coarseMonotonicNanoseconds`: read on every event, and
        /// the silence limit is seconds long).
        var lastActivity: UInt64
        /// Events consumed since the last `onConsumed` call.
        var consumedSinceCredit = 0
        /// The consumer asked to be resumed on the emitting thread (`resumeConsumerOnEmittingThread()`).
        var consumerInline = false

        var pending: Int { buffer.count - head }

        mutating func pop() -> BackendEvent? {
            guard head < buffer.count else { return nil }
            let event = buffer[head]
            head += 1
            if head > 64 && head * 2 > buffer.count {
                buffer.removeFirst(head)
                head = 0
            }
            return event
        }
    }

    /// A stream with a cancel grace of its own (tests).
    convenience init(
        id: UInt64,
        capacity: Int = 256,
        silenceLimit: Duration,
        cancelGrace: Duration,
        onCancel: @escaping @Sendable () -> Void,
        onTerminal: @escaping @Sendable (_ expired: Bool) -> Void,
        onConsumed: (@Sendable (Int) -> Void)? = nil
    ) {
        self.init(
            id: id, capacity: capacity, silenceLimit: silenceLimit, sharedCancelGrace: SharedCancelGrace(cancelGrace),
            onCancel: onCancel, onTerminal: onTerminal, onConsumed: onConsumed)
    }

    init(
        id: UInt64,
        capacity: Int = 256,
        silenceLimit: Duration,
        sharedCancelGrace: SharedCancelGrace,
        onCancel: @escaping @Sendable () -> Void,
        onTerminal: @escaping @Sendable (_ expired: Bool) -> Void,
        onConsumed: (@Sendable (Int) -> Void)? = nil
    ) {
        self.id = id
        self.capacity = capacity
        self.silenceLimit = silenceLimit
        silenceLimitNanoseconds = SystemClock.nanoseconds(silenceLimit)
        self.sharedCancelGrace = sharedCancelGrace
        self.onCancel = onCancel
        self.onTerminal = onTerminal
        self.onConsumed = onConsumed
        self.state = Mutex(State(lastActivity: SystemClock.coarseMonotonicNanoseconds()))
    }

    // MARK: - Consumer side

    /// The next event if one is buffered, without waiting: `.some(nil)` after the terminal event was delivered,
    /// `nil` when the consumer would have to wait.
    ///
    /// A consumer that drains what is already there first avoids an `await` per event, each a trip through the
    /// concurrency runtime; a backend that answers from inside `generate` has delivered everything by then.
    public func nextBuffered() -> BackendEvent?? {
        let (event, wake, credit) = state.withLock { state -> (BackendEvent??, Bool, Int) in
            if let event = state.pop() {
                if event.isTerminal { state.terminalDelivered = true }
                return (.some(event), state.releaseEmitterIfRoom(capacity: capacity), state.countConsumed())
            }
            return (state.terminalDelivered ? .some(nil) : nil, false, 0)
        }
        if wake { emitterWakeup.signal() }
        if credit > 0 { onConsumed?(credit) }
        return event
    }

    /// The next event, or `nil` after the terminal event was delivered.
    public func next() async -> BackendEvent? {
        if let buffered = nextBuffered() { return buffered }
        enum Step {
            case event(BackendEvent?)
            case wait
        }
        return await withCheckedContinuation { continuation in
            let (immediate, wake, credit) = state.withLock { state -> (Step, Bool, Int) in
                if let event = state.pop() {
                    if event.isTerminal { state.terminalDelivered = true }
                    return (.event(event), state.releaseEmitterIfRoom(capacity: capacity), state.countConsumed())
                }
                if state.terminalDelivered { return (.event(nil), false, 0) }
                state.waiter = continuation
                return (.wait, false, 0)
            }
            if wake { emitterWakeup.signal() }
            if credit > 0 { onConsumed?(credit) }
            if case .event(let event) = immediate { continuation.resume(returning: event) }
        }
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        let stream: GenerationStream
        public mutating func next() async -> BackendEvent? { await stream.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(stream: self) }

    /// Asks the backend to stop (client gone, deadline, drain). Idempotent. The stream still ends with a terminal
    /// event: the backend's own, or the watchdog's after the cancel grace period.
    public func cancel() {
        let (callBackend, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.cancelRequested, !state.terminalReceived else { return (false, false) }
            state.cancelRequested = true
            let wake = state.emitterBlocked
            state.emitterBlocked = false
            guard state.cancelArmed else {
                state.cancelPending = true
                return (false, wake)
            }
            state.cancelDeliveredAt = .now
            state.callsInFlight += 1
            return (true, wake)
        }
        if wake { emitterWakeup.signal() }
        if callBackend { deliverCancel() }
    }

    /// Called once `generate` returned: from now on `cancel()` reaches the backend; a cancel that came earlier
    /// is delivered now. A terminal event that arrived during `generate` ends the generation here.
    func armCancel() {
        enum Step {
            case deliver
            case end(expired: Bool)
            case none
        }
        let step = state.withLock { state -> Step in
            state.cancelArmed = true
            defer { state.cancelPending = false }
            if state.cancelPending && !state.terminalReceived {
                // `generate`'s call slot passes to the cancel call.
                state.cancelDeliveredAt = .now
                return .deliver
            }
            state.callsInFlight -= 1
            return state.takeEnd() ? .end(expired: state.expired) : .none
        }
        switch step {
        case .deliver: deliverCancel()
        case .end(let expired): onTerminal(expired)
        case .none: break
        }
    }

    /// Calls the backend's `cancel` (a call counted in `callsInFlight`), then ends the generation if its terminal
    /// event arrived meanwhile.
    private func deliverCancel() {
        onCancel()
        let end = state.withLock { state -> Bool? in
            state.callsInFlight -= 1
            return state.takeEnd() ? state.expired : nil
        }
        if let expired = end { onTerminal(expired) }
    }

    /// Lets the consumer continue on the backend thread that delivers the event it waits for (in-process hosting),
    /// instead of that thread handing it to another.
    ///
    /// For consumers that only collect events and answer the client (a non-streaming response): the consumer then
    /// runs inside the backend's `emit` call, so it must not block for long, and it must never call back into the
    /// backend (`cancel`) from there. It takes effect with an executor that honours `InlineResumption` (the HTTP
    /// server's handler executor); on any other executor it changes nothing. An event that arrives while a call
    /// into the backend for this generation is in flight (a terminal event sent from inside `cancel`) is handed
    /// to the executor as usual: the consumer never runs inside the host's own call, on the thread that made it.
    public func resumeConsumerOnEmittingThread() {
        state.withLock { $0.consumerInline = true }
    }

    /// Whether the terminal event has arrived (from the backend or the watchdog): every event of the generation is
    /// then buffered or consumed.
    public var hasEnded: Bool { state.withLock { $0.terminalReceived } }

    /// Events buffered and not yet consumed (bounded by `capacity`, plus one usage and the terminal event after a
    /// cancel).
    var pendingCount: Int { state.withLock { $0.pending } }

    /// Whether the consumer waits in `next()` for an event (tests).
    var isConsumerWaiting: Bool { state.withLock { $0.waiter != nil } }

    /// Whether `cancel()` was called before the terminal event.
    public var wasCancelled: Bool { state.withLock { $0.cancelRequested } }

    // MARK: - Producer side (backend threads)

    /// Accepts one event from the backend. Returns the value `emit` returns: 0 continue, 1 stop.
    ///
    /// With `waitForRoom` (in-process hosting) a full buffer blocks the caller until the consumer makes room or
    /// the request is cancelled. Without it (runner hosting: the relay thread must never block) the event is
    /// always buffered; the runner's credit window (`onConsumed`) bounds the buffer instead.
    func receive(_ event: BackendEvent, waitForRoom: Bool = true) -> Int32 {
        var resume: CheckedContinuation<BackendEvent?, Never>?
        var inline = false
        var mustWait = false
        var credit = 0
        var end = false
        let verdict = state.withLock { state -> Int32 in
            if state.terminalReceived { return 1 }  // after the terminal event: ignored (ABI rule)
            if state.cancelRequested && !event.isTerminal {
                if case .usage = event {} else { return 1 }
            }
            state.lastActivity = SystemClock.coarseMonotonicNanoseconds()
            if event.isTerminal {
                state.terminalReceived = true
                end = state.takeEnd()
            }
            if let waiter = state.waiter {
                state.waiter = nil
                resume = waiter
                // Runner hosting delivers on the relay thread, which serves every stream of its runner. And never
                // while a call into the backend is in flight: a terminal event sent from inside `cancel` would run
                // the consumer inside the backend's `cancel`, on the thread that asked for it (an event loop, the
                // drain deadline's control queue, the watchdog).
                inline = state.consumerInline && waitForRoom && state.callsInFlight == 0
                if event.isTerminal { state.terminalDelivered = true }
                credit = state.countConsumed()
            } else if state.cancelRequested, case .usage = event, state.pending > 0, case .usage = state.buffer[state.buffer.count - 1] {
                // After a cancel usage events pass without backpressure (they are still counted); they are
                // cumulative, so a newer one replaces one still buffered, and a backend that keeps sending them
                // cannot grow the buffer.
                state.buffer[state.buffer.count - 1] = event
            } else {
                state.buffer.append(event)
                if waitForRoom && !event.isTerminal && !state.cancelRequested && state.pending >= capacity {
                    state.emitterBlocked = true
                    mustWait = true
                }
            }
            return state.cancelRequested ? 1 : 0
        }
        // The generation's bookkeeping ends before the consumer sees the terminal event: an inline consumer
        // answers the client before `resume` returns, and the lease must not outlive the answer. With a call into
        // the backend still in flight (`generate`, `cancel`) it ends when that call returns instead.
        if end { onTerminal(false) }
        if let resume {
            if inline {
                InlineResumption.with(permitted: true) { resume.resume(returning: event) }
            } else {
                resume.resume(returning: event)
            }
        }
        if credit > 0 { onConsumed?(credit) }
        if event.isTerminal { return verdict }
        if mustWait {
            // Backpressure: wait until the consumer makes room or the request is cancelled.
            emitterWakeup.wait()
            return state.withLock { $0.cancelRequested ? 1 : 0 }
        }
        return verdict
    }

    // MARK: - Watchdog

    /// What the watchdog should do with this stream now.
    enum WatchdogVerdict {
        case healthy
        case expire(BackendEvent)
    }

    func watchdogCheck(now: ContinuousClock.Instant) -> WatchdogVerdict {
        state.withLock { state in
            // Until `generate` returned the stream is the caller's (the runner call has its own deadline): expiring it
            // would call `cancel` before `generate` returned, which the ABI forbids.
            guard !state.terminalReceived, state.cancelArmed else { return .healthy }
            // A cancel delivered long ago and not honoured: whatever the consumer does, the backend is at fault.
            if let deliveredAt = state.cancelDeliveredAt {
                return now - deliveredAt > cancelGrace ? .expire(.done(.cancelled)) : .healthy
            }
            // The backend waits for the consumer, not the other way round: it is blocked in `emit` (in-process), or
            // its whole credit window is unacknowledged (runner: credit returns in batches, so events the consumer
            // took but has not yet credited still hold the runner back).
            guard !state.emitterBlocked, state.unacknowledged(creditBased: onConsumed != nil) < capacity else { return .healthy }
            let coarseNow = SystemClock.coarseMonotonicNanoseconds()
            if coarseNow > state.lastActivity, coarseNow - state.lastActivity > silenceLimitNanoseconds {
                return .expire(
                    .failed(.timeout, message: "the backend sent no event for \(silenceLimit.components.seconds) s and was cut off"))
            }
            return .healthy
        }
    }

    /// Ends the stream with a synthesized terminal event; later backend events are ignored. The backend is asked
    /// to stop when it may be (after `generate` returned).
    func expire(with terminal: BackendEvent) {
        var resume: CheckedContinuation<BackendEvent?, Never>?
        enum Step {
            case ignored
            case cancelThenEnd
            case end
            case waitForCalls
        }
        let (step, wake) = state.withLock { state -> (Step, Bool) in
            guard !state.terminalReceived else { return (.ignored, false) }
            state.terminalReceived = true
            state.expired = true
            state.cancelRequested = true
            state.cancelPending = false
            let wake = state.emitterBlocked
            state.emitterBlocked = false
            if let waiter = state.waiter {
                state.waiter = nil
                state.terminalDelivered = true
                resume = waiter
            } else {
                state.buffer.append(terminal)
            }
            if state.cancelArmed {
                state.callsInFlight += 1
                return (.cancelThenEnd, wake)
            }
            return (state.takeEnd() ? .end : .waitForCalls, wake)
        }
        guard step != .ignored else { return }
        if wake { emitterWakeup.signal() }
        resume?.resume(returning: terminal)
        switch step {
        case .cancelThenEnd: deliverCancel()
        case .end: onTerminal(true)
        case .ignored, .waitForCalls: break
        }
    }
}

extension GenerationStream.State {
    /// Counts one consumed event; returns the credit to send now (0 until a batch is complete).
    mutating func countConsumed() -> Int {
        consumedSinceCredit += 1
        guard consumedSinceCredit >= GenerationStream.consumedBatch else { return 0 }
        defer { consumedSinceCredit = 0 }
        // The backend may send again from now on: its silence is measured from here, not from its last event
        // (a slow consumer held it back for that long).
        lastActivity = SystemClock.coarseMonotonicNanoseconds()
        return consumedSinceCredit
    }

    /// Wakes a blocked emitter once the buffer is below capacity again. Returns whether to signal.
    mutating func releaseEmitterIfRoom(capacity: Int) -> Bool {
        guard emitterBlocked, pending < capacity else { return false }
        emitterBlocked = false
        lastActivity = SystemClock.coarseMonotonicNanoseconds()  // as for credit: the wait was the consumer's
        return true
    }

    /// Events the backend sent that it has not been given credit for: the buffered ones, plus (with credit-based
    /// flow control) those consumed since the last credit batch.
    func unacknowledged(creditBased: Bool) -> Int {
        creditBased ? pending + consumedSinceCredit : pending
    }

    /// Whether the generation ends now: its terminal event arrived and no call into the backend is in flight.
    /// True once; the caller then runs `onTerminal`.
    mutating func takeEnd() -> Bool {
        guard terminalReceived, callsInFlight == 0, !ended else { return false }
        ended = true
        return true
    }
}
