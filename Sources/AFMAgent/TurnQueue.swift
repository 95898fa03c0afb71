// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The agent's turn queue: turns of one agent run one at a time, in the order they were started.
final class TurnQueue: Sendable {
    private struct State {
        var busy = false
        var waiters: [(id: UInt64, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextID: UInt64 = 0
    }

    private let state = Mutex(State())

    /// Waits for the turn's place; false when the waiting task was cancelled (it then holds no place).
    func acquire() async -> Bool {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let immediate: Bool? = state.withLock { state in
                    if Task.isCancelled { return false }
                    if !state.busy {
                        state.busy = true
                        return true
                    }
                    state.waiters.append((id, continuation))
                    return nil
                }
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            let waiter = state.withLock { state in
                state.waiters.firstIndex { $0.id == id }.map { state.waiters.remove(at: $0).continuation }
            }
            waiter?.resume(returning: false)
        }
    }

    /// Gives the place to the next waiting turn.
    func release() {
        let next = state.withLock { state in
            guard !state.waiters.isEmpty else {
                state.busy = false
                return nil as CheckedContinuation<Bool, Never>?
            }
            return state.waiters.removeFirst().continuation
        }
        next?.resume(returning: true)
    }
}
