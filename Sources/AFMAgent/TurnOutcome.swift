// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// A turn's result, set once when the turn ends and awaited by any number of callers of
/// ``AgentRun/response()``.
final class TurnOutcome: Sendable {
    private struct State {
        var result: Result<AgentResponse, AgentError>?
        var waiters: [CheckedContinuation<Result<AgentResponse, AgentError>, Never>] = []
    }

    private let state = Mutex(State())

    func set(_ result: Result<AgentResponse, AgentError>) {
        let waiters = state.withLock { state in
            state.result = result
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: result) }
    }

    func wait() async -> Result<AgentResponse, AgentError> {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state in
                if let result = state.result { return Optional(result) }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
