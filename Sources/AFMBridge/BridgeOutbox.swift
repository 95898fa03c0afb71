// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import Dispatch
import Synchronization

/// The bridge's outgoing messages, delivered in the order they were sent, one at a time, on one dedicated
/// thread (the *delivery thread*): stdout for `afm bridge`, the host's callback for `libafm-bridge.so`.
///
/// Senders never wait for the host: a message is queued and the caller goes on (runs stream from Swift tasks,
/// which must never block on a host that reads slowly). The queue is not bounded; a host that stops reading
/// while runs stream makes it grow, as a pipe it never drains would.
///
/// ```
/// send(json) ─► queue ─► delivery thread ─► deliver(bytes)   (in order; never two at once)
/// finish() ─► the rest delivered ─► thread joined            (deliver is never called again)
/// ```
public final class BridgeOutbox: Sendable {
    /// Delivers one encoded message (without a newline); false when the host is gone (nothing more is delivered).
    public typealias Deliver = @Sendable (_ message: [UInt8]) -> Bool

    private struct State {
        var queue: [[UInt8]] = []
        var head = 0
        var finished = false
        var hostGone = false
        var thread: IOThread?
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let deliver: Deliver
    private let onHostGone: @Sendable () -> Void

    /// Starts the delivery thread. `onHostGone` runs once, on the delivery thread, when `deliver` returns false.
    public init(name: String = "afm-bridge-out", deliver: @escaping Deliver, onHostGone: @escaping @Sendable () -> Void = {})
        throws(SystemCallError)
    {
        self.deliver = deliver
        self.onHostGone = onHostGone
        let thread = try IOThread.spawn(name: name) { [self] in run() }
        state.withLock { $0.thread = thread }
    }

    /// Queues one message (a JSON-RPC response or notification). Ignored after ``finish()``.
    public func send(_ message: JSONValue) {
        let bytes = message.encoded()
        let queued = state.withLock { state in
            guard !state.finished else { return false }
            state.queue.append(bytes)
            return true
        }
        if queued { wake.signal() }
    }

    /// Whether the caller runs on the delivery thread (inside a delivery).
    public var isDeliveryThread: Bool { state.withLock { $0.thread?.isCurrent ?? false } }

    /// Delivers what is queued, then stops the thread and waits for it; ``send(_:)`` is ignored from now on.
    /// Idempotent. Must not be called on the delivery thread (it would wait for itself).
    public func finish() {
        let thread = state.withLock { state in
            state.finished = true
            defer { state.thread = nil }
            return state.thread
        }
        wake.signal()
        thread?.join()
    }

    private func run() {
        while true {
            wake.wait()
            // One wake may stand for several messages: deliver everything queued.
            while let message = take() {
                if !deliver(message) {
                    let first = state.withLock { state in
                        defer { state.hostGone = true }
                        return !state.hostGone
                    }
                    if first { onHostGone() }
                }
            }
            if state.withLock({ $0.finished && $0.head >= $0.queue.count }) { return }
        }
    }

    /// The next message to deliver, nil when the queue is empty. Once the host is gone, messages are dropped.
    private func take() -> [UInt8]? {
        state.withLock { state in
            while state.head < state.queue.count {
                let message = state.queue[state.head]
                state.head += 1
                // Reclaim the delivered prefix now and then (amortized O(1) per message).
                if state.head >= 64 && state.head * 2 >= state.queue.count {
                    state.queue.removeFirst(state.head)
                    state.head = 0
                }
                if !state.hostGone { return message }
            }
            return nil
        }
    }
}
