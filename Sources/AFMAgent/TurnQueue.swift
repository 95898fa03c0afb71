// SPDX-License-Identifier: Apache-2.0
import Synchronization

/// The agent's turn queue: turns of one agent run one at a time, in the order they were started.
///
/// The order is fixed when a turn is asked for: ``take()`` runs synchronously in `Agent.run` and hands out a
/// ticket; ``acquire(_:)`` (in the turn's task) waits for that ticket's turn. Before, the place was taken in the
/// task itself, so two turns started back to back ran in whichever order their tasks were scheduled.
final class TurnQueue: Sendable {
    private struct State {
        /// The last ticket handed out.
        var lastTicket: UInt64 = 0
        /// The ticket whose turn it is (it may not have reached ``acquire(_:)`` yet).
        var serving: UInt64 = 1
        /// Tickets given up (cancelled) before their turn: skipped when it comes.
        var abandoned: Set<UInt64> = []
        var waiters: [UInt64: CheckedContinuation<Bool, Never>] = [:]

        /// Moves to the next ticket not given up; returns its waiter if it already waits.
        mutating func advance() -> CheckedContinuation<Bool, Never>? {
            serving += 1
            while abandoned.remove(serving) != nil { serving += 1 }
            return waiters.removeValue(forKey: serving)
        }

        /// A ticket leaves the line without running.
        mutating func giveUp(_ ticket: UInt64) -> CheckedContinuation<Bool, Never>? {
            if ticket == serving { return advance() }
            abandoned.insert(ticket)
            return nil
        }
    }

    private let state = Mutex(State())

    /// A place in line, after every place taken before. Every ticket must then be passed to ``acquire(_:)``.
    func take() -> UInt64 {
        state.withLock { state in
            state.lastTicket += 1
            return state.lastTicket
        }
    }

    /// Waits for `ticket`'s turn; false when the waiting task was cancelled (its place is then given up).
    func acquire(_ ticket: UInt64) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let (immediate, next): (Bool?, CheckedContinuation<Bool, Never>?) = state.withLock { state in
                    if Task.isCancelled { return (false, state.giveUp(ticket)) }
                    if state.serving == ticket { return (true, nil) }
                    state.waiters[ticket] = continuation
                    return (nil, nil)
                }
                next?.resume(returning: true)
                if let immediate { continuation.resume(returning: immediate) }
            }
        } onCancel: {
            // Still waiting: leave the line. (Already resumed: the turn holds its place and releases it.)
            let (waiter, next): (CheckedContinuation<Bool, Never>?, CheckedContinuation<Bool, Never>?) = state.withLock { state in
                guard let waiter = state.waiters.removeValue(forKey: ticket) else { return (nil, nil) }
                return (waiter, state.giveUp(ticket))
            }
            next?.resume(returning: true)
            waiter?.resume(returning: false)
        }
    }

    /// Gives the place to the next turn in line.
    func release() {
        let next = state.withLock { $0.advance() }
        next?.resume(returning: true)
    }
}
