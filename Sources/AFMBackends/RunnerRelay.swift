// SPDX-License-Identifier: Apache-2.0
import AFMCore
import CAFMBackendABI
import Dispatch
import Synchronization

/// Runner side of one generation: turns the backend's `emit` calls into event frames, with flow control.
///
/// The runner may have at most `window` events of a generation unacknowledged: each consumed batch on the host
/// returns a `credit` frame. An `emit` with no credit left waits (backpressure reaches the backend exactly as
/// in-process), and returns 1 at once after a `cancel`. Like the host's `GenerationStream`, it forwards exactly
/// one terminal event, lets usage through after a cancel (within the window; beyond it only the latest, sent
/// before the terminal event), and ignores everything after the terminal event.
final class RunnerRelay: Sendable {
    let id: UInt64
    private let outbox: RunnerOutbox
    private let sink: SinkPool.Sink
    private let state: Mutex<State>
    private let wakeup = DispatchSemaphore(value: 0)

    struct State {
        var credit: Int
        var cancelled = false
        var terminal = false
        var waiting = false
        /// After a cancel: the latest usage event that found no credit left. Usage is cumulative, so the latest is
        /// all that counts; it is sent just before the terminal event.
        var heldUsage: BackendEvent?
    }

    init(id: UInt64, window: Int, outbox: RunnerOutbox) {
        self.id = id
        self.outbox = outbox
        self.state = Mutex(State(credit: window))
        self.sink = RunnerRelayTable.shared.sinks.take(id: id, emit: relayEmitTrampoline)
    }

    /// The C sink to hand to `generate`.
    var sinkPointer: UnsafePointer<afm_event_sink> { UnsafePointer(sink.pointer) }

    /// Forwards one event; returns what `emit` returns (0 continue, 1 stop).
    func emit(_ event: BackendEvent) -> Int32 {
        enum Step {
            case drop
            case send(held: BackendEvent?)
            case wait
        }
        while true {
            let step = state.withLock { state -> Step in
                if state.terminal { return .drop }
                if state.cancelled && !event.isTerminal {
                    guard case .usage = event else { return .drop }
                    // Usage after a cancel passes without waiting for credit, but not without bound: a backend
                    // that keeps sending it would grow the outbox (and the host's buffer) until the cancel grace
                    // ran out. Within the window it is sent; beyond it only the latest is kept.
                    if state.credit <= 0 {
                        state.heldUsage = event
                        return .drop
                    }
                    // Sent now, this one is newer than any held before: sending the held one later (before the
                    // terminal event) would make an older count the last word.
                    state.heldUsage = nil
                }
                if !event.isTerminal && !state.cancelled && state.credit <= 0 {
                    state.waiting = true
                    return .wait
                }
                state.credit -= 1
                var held: BackendEvent?
                if event.isTerminal {
                    state.terminal = true
                    held = state.heldUsage
                    state.heldUsage = nil
                }
                return .send(held: held)
            }
            switch step {
            case .drop:
                return 1
            case .wait:
                wakeup.wait()
                continue
            case .send(let held):
                if let held { outbox.send(.event(requestID: id, held)) }
                outbox.send(.event(requestID: id, event))
                let verdict: Int32 = state.withLock { $0.cancelled } ? 1 : 0
                if event.isTerminal {
                    RunnerRelayTable.shared.remove(id)
                    RunnerRelayTable.shared.sinks.give(sink)
                }
                return verdict
            }
        }
    }

    /// The host consumed `events` more events.
    func grant(_ events: Int) {
        let wake = state.withLock { state -> Bool in
            state.credit += events
            defer { state.waiting = false }
            return state.waiting
        }
        if wake { wakeup.signal() }
    }

    /// The host cancelled the request: later emits return 1, and a waiting emitter wakes.
    func cancel() {
        let wake = state.withLock { state -> Bool in
            state.cancelled = true
            defer { state.waiting = false }
            return state.waiting
        }
        if wake { wakeup.signal() }
    }

    /// `generate` refused: no event will come; the sink can be reused after its quarantine. A backend that sent its
    /// terminal event and then refused (a contract breach) already gave the sink back with that event: it must not
    /// reach the pool twice, or two later generations would share it.
    func discard() {
        let alreadyReturned = state.withLock { state -> Bool in
            defer { state.terminal = true }
            return state.terminal
        }
        guard !alreadyReturned else { return }
        RunnerRelayTable.shared.remove(id)
        RunnerRelayTable.shared.sinks.give(sink)
    }
}

/// The runner's live relays by request id (the C sink's `ctx`), and its sink structs.
final class RunnerRelayTable: Sendable {
    static let shared = RunnerRelayTable()

    private let relays = Mutex<[UInt64: RunnerRelay]>([:])
    let sinks = SinkPool()

    func insert(_ relay: RunnerRelay) {
        relays.withLock { $0[relay.id] = relay }
    }

    func remove(_ id: UInt64) {
        _ = relays.withLock { $0.removeValue(forKey: id) }
    }

    func lookup(_ id: UInt64) -> RunnerRelay? {
        relays.withLock { $0[id] }
    }
}

/// The C `emit` of every runner sink: copies and validates the event (as in-process hosting does) and relays it.
private let relayEmitTrampoline: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<afm_event>?) -> Int32 = { context, event in
    let id = UInt64(UInt(bitPattern: context))
    guard let relay = RunnerRelayTable.shared.lookup(id) else { return 1 }
    guard let event else { return relay.emit(.failed(.internal, message: "the backend emitted a NULL event")) }
    return relay.emit(BackendEvent(copying: event))
}
