// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Synchronization

/// Hands encoded replies from the task running a call to the connection's thread, which writes them.
///
/// `push` never blocks (the task must not wait on a socket); `next` blocks the connection thread (a
/// dedicated thread, never the cooperative pool) until a reply arrives or the outbox is finished.
final class ReplyOutbox: Sendable {
    private struct State {
        var queue: [[UInt8]] = []
        var finished = false
    }

    private let state = Mutex(State())
    private let available = DispatchSemaphore(value: 0)

    /// Queues one encoded reply; ignored after ``finish()``.
    func push(_ bytes: [UInt8]) {
        let accepted = state.withLock { state -> Bool in
            guard !state.finished else { return false }
            state.queue.append(bytes)
            return true
        }
        if accepted { available.signal() }
    }

    /// Marks the end of the replies; ``next()`` returns `nil` once the queue is empty.
    func finish() {
        let first = state.withLock { state -> Bool in
            defer { state.finished = true }
            return !state.finished
        }
        if first { available.signal() }
    }

    /// The next reply, or `nil` when finished and drained. Blocks the calling thread.
    func next() -> [UInt8]? {
        while true {
            available.wait()
            let item = state.withLock { state -> (bytes: [UInt8]?, done: Bool) in
                if !state.queue.isEmpty { return (state.queue.removeFirst(), false) }
                return (nil, state.finished)
            }
            if let bytes = item.bytes { return bytes }
            if item.done {
                available.signal()  // keep later calls from blocking
                return nil
            }
        }
    }
}
