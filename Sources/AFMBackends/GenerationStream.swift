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
///   to stop; terminal and usage events are still accepted so usage of cancelled generations is counted.
/// - The watchdog ends a generation whose backend goes silent (`expire`), synthesizing the terminal event.
public final class GenerationStream: Sendable, AsyncSequence {
    public typealias Element = BackendEvent

    /// Process-unique id; also the `ctx` value of the C event sink.
    public let id: UInt64
    let capacity: Int
    /// How long the backend may stay silent before the watchdog fails the generation with `timeout`.
    let silenceLimit: Duration
    private let silenceLimitNanoseconds: UInt64
    /// How long the backend may take to end the generation after `cancel()`.
    let cancelGrace: Duration
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
        var cancelRequestedAt: ContinuousClock.Instant?
        var expired = false
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

    init(
        id: UInt64,
        capacity: Int = 256,
        silenceLimit: Duration,
        cancelGrace: Duration,
        onCancel: @escaping @Sendable () -> Void,
        onTerminal: @escaping @Sendable (_ expired: Bool) -> Void,
        onConsumed: (@Sendable (Int) -> Void)? = nil
    ) {
        self.id = id
        self.capacity = capacity
        self.silenceLimit = silenceLimit
        silenceLimitNanoseconds = SystemClock.nanoseconds(silenceLimit)
        self.cancelGrace = cancelGrace
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
            state.cancelRequestedAt = .now
            let wake = state.emitterBlocked
            state.emitterBlocked = false
            if !state.cancelArmed { state.cancelPending = true }
            return (state.cancelArmed, wake)
        }
        if wake { emitterWakeup.signal() }
        if callBackend { onCancel() }
    }

    /// Called once `generate` returned: from now on `cancel()` reaches the backend; a cancel that came earlier
    /// is delivered now.
    func armCancel() {
        let deliver = state.withLock { state -> Bool in
            state.cancelArmed = true
            defer { state.cancelPending = false }
            return state.cancelPending && !state.terminalReceived
        }
        if deliver { onCancel() }
    }

    /// Lets the consumer continue on the backend thread that delivers the event it waits for (in-process hosting),
    /// instead of that thread handing it to another.
    ///
    /// For consumers that only collect events and answer the client (a non-streaming response): the consumer then
    /// runs inside the backend's `emit` call, so it must not block for long, and it must never call back into the
    /// backend (`cancel`) from there. It takes effect with an executor that honours `InlineResumption` (the HTTP
    /// server's handler executor); on any other executor it changes nothing.
    public func resumeConsumerOnEmittingThread() {
        state.withLock { $0.consumerInline = true }
    }

    /// Whether the terminal event has arrived (from the backend or the watchdog): every event of the generation is
    /// then buffered or consumed.
    public var hasEnded: Bool { state.withLock { $0.terminalReceived } }

    /// Events buffered and not yet consumed (bounded by `capacity`).
    var pendingCount: Int { state.withLock { $0.pending } }

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
        let verdict = state.withLock { state -> Int32 in
            if state.terminalReceived { return 1 }  // after the terminal event: ignored (ABI rule)
            if state.cancelRequested && !event.isTerminal {
                if case .usage = event {} else { return 1 }
            }
            state.lastActivity = SystemClock.coarseMonotonicNanoseconds()
            if event.isTerminal { state.terminalReceived = true }
            if let waiter = state.waiter {
                state.waiter = nil
                resume = waiter
                // Runner hosting delivers on the relay thread, which serves every stream of its runner.
                inline = state.consumerInline && waitForRoom
                if event.isTerminal { state.terminalDelivered = true }
                credit = state.countConsumed()
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
        // answers the client before `resume` returns, and the lease must not outlive the answer.
        if event.isTerminal { onTerminal(false) }
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
            // A full buffer means the consumer is the slow side, not the backend (in runner hosting the runner
            // then waits for credit without the host seeing a blocked emitter).
            guard !state.terminalReceived, !state.emitterBlocked, state.pending < capacity else { return .healthy }
            if let cancelledAt = state.cancelRequestedAt, now - cancelledAt > cancelGrace {
                return .expire(.done(.cancelled))
            }
            let coarseNow = SystemClock.coarseMonotonicNanoseconds()
            if coarseNow > state.lastActivity, coarseNow - state.lastActivity > silenceLimitNanoseconds {
                return .expire(
                    .failed(.timeout, message: "the backend sent no event for \(silenceLimit.components.seconds) s and was cut off"))
            }
            return .healthy
        }
    }

    /// Ends the stream with a synthesized terminal event; later backend events are ignored.
    func expire(with terminal: BackendEvent) {
        var resume: CheckedContinuation<BackendEvent?, Never>?
        let (didExpire, wake) = state.withLock { state -> (Bool, Bool) in
            guard !state.terminalReceived else { return (false, false) }
            state.terminalReceived = true
            state.expired = true
            state.cancelRequested = true
            let wake = state.emitterBlocked
            state.emitterBlocked = false
            if let waiter = state.waiter {
                state.waiter = nil
                state.terminalDelivered = true
                resume = waiter
            } else {
                state.buffer.append(terminal)
            }
            return (true, wake)
        }
        guard didExpire else { return }
        if wake { emitterWakeup.signal() }
        resume?.resume(returning: terminal)
        onCancel()
        onTerminal(true)
    }
}

extension GenerationStream.State {
    /// Counts one consumed event; returns the credit to send now (0 until a batch is complete).
    mutating func countConsumed() -> Int {
        consumedSinceCredit += 1
        guard consumedSinceCredit >= GenerationStream.consumedBatch else { return 0 }
        defer { consumedSinceCredit = 0 }
        return consumedSinceCredit
    }

    /// Wakes a blocked emitter once the buffer is below capacity again. Returns whether to signal.
    mutating func releaseEmitterIfRoom(capacity: Int) -> Bool {
        guard emitterBlocked, pending < capacity else { return false }
        emitterBlocked = false
        return true
    }
}
