// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// One tool call's output, set once by whoever comes first (the handler, the host, a timeout, a cancel) and
/// awaited by the call.
final class OutputSlot: Sendable {
    private struct State {
        var output: AgentToolOutput?
        var waiter: CheckedContinuation<AgentToolOutput, Never>?
    }

    private let state = Mutex(State())

    /// Sets the output unless one was set already; returns whether this call set it.
    @discardableResult
    func resolve(_ output: AgentToolOutput) -> Bool {
        let waiter: CheckedContinuation<AgentToolOutput, Never>?? = state.withLock { state in
            guard state.output == nil else { return .none }
            state.output = output
            defer { state.waiter = nil }
            return .some(state.waiter)
        }
        guard let waiter else { return false }
        waiter?.resume(returning: output)
        return true
    }

    /// Waits for the output.
    func wait() async -> AgentToolOutput {
        await withCheckedContinuation { continuation in
            let ready: AgentToolOutput? = state.withLock { state in
                if let output = state.output { return output }
                state.waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
