// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// What a running turn shares with its ``AgentRun``: the external calls waiting for the host, the cancel flag,
/// and the handler tasks that must end before the turn reports its end.
final class TurnControl: Sendable {
    private struct State {
        var cancelled = false
        var ended = false
        var external: [String: OutputSlot] = [:]
        var work: [Task<Void, Never>] = []
        var task: Task<Void, Never>?
    }

    private let state = Mutex(State())

    /// Whether the host cancelled the turn.
    var isCancelled: Bool { state.withLock { $0.cancelled } }

    /// The task running the turn (cancelled by ``cancel()``).
    func setTask(_ task: Task<Void, Never>) {
        let cancelNow = state.withLock { state in
            state.task = task
            return state.cancelled
        }
        if cancelNow { task.cancel() }
    }

    /// Registers an external call's slot before the host is told about the call; nil once the turn was
    /// cancelled or ended (the call then gets an error output at once).
    func registerExternal(callID: String) -> OutputSlot? {
        state.withLock { state in
            guard !state.cancelled, !state.ended else { return nil }
            let slot = OutputSlot()
            state.external[callID] = slot
            return slot
        }
    }

    /// The host's output for an external call; false when no call with that id is waiting.
    func submit(_ output: AgentToolOutput, for callID: String) -> Bool {
        let slot = state.withLock { $0.external.removeValue(forKey: callID) }
        return slot?.resolve(output) ?? false
    }

    /// Forgets an external call that got its output some other way (a timeout).
    func forgetExternal(callID: String) {
        _ = state.withLock { $0.external.removeValue(forKey: callID) }
    }

    /// Cancels the turn: waiting external calls get an error output, the turn's task is cancelled.
    func cancel() {
        let (slots, task) = state.withLock { state in
            state.cancelled = true
            defer { state.external = [:] }
            return (Array(state.external.values), state.task)
        }
        for slot in slots { slot.resolve(.error("cancelled: the turn was cancelled")) }
        task?.cancel()
    }

    /// Records a handler task, awaited by ``awaitWork()``.
    func track(_ task: Task<Void, Never>) {
        state.withLock { $0.work.append(task) }
    }

    /// Waits until every handler task of the turn has ended.
    func awaitWork() async {
        let work = state.withLock { $0.work }
        for task in work { await task.value }
    }

    /// The turn is over: calls still waiting for the host get an error output.
    func end() {
        let slots = state.withLock { state in
            state.ended = true
            defer { state.external = [:] }
            return Array(state.external.values)
        }
        for slot in slots { slot.resolve(.error("the turn ended before the host answered")) }
    }
}
