// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import Dispatch
import Synchronization

/// The bridge's outgoing messages, delivered in the order they were sent, one at a time, on one dedicated
/// thread (the *delivery thread*): stdout for `afm bridge`, the host's callback for `libafm-bridge.so`.
///
/// Senders never wait for the host: a message is queued and the caller goes on (runs stream from Swift tasks,
/// which must never block on a host that reads slowly). The queue is bounded by ``maxQueuedBytes``: past it,
/// a *droppable* message (a run's streaming event) is refused, and the bridge cancels that run with a `busy`
/// error (docs/bridge.md, "Slow hosts"); answers and a run's last event are always queued, so a host that stops
/// reading holds at most the cap plus one answer per request it sent and one last event per run.
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
        /// The bytes of the messages queued and not yet taken for delivery.
        var queuedBytes = 0
        /// The delivery thread, kept until it has been joined (``isDeliveryThread`` must hold while it delivers
        /// the last messages after ``finish()``).
        var thread: IOThread?
        /// A ``finish()`` took the thread to join it.
        var joining = false
    }

    private let state = Mutex(State())
    private let wake = DispatchSemaphore(value: 0)
    private let deliver: Deliver
    private let onHostGone: @Sendable () -> Void
    /// How many bytes of messages may wait for the host before droppable ones are refused.
    public let maxQueuedBytes: Int
    /// 32 MiB: thousands of streamed events' worth, far more than a host that reads at all ever leaves queued.
    public static let defaultMaxQueuedBytes = 32 << 20

    /// Starts the delivery thread. `onHostGone` runs once, on the delivery thread, when `deliver` returns false.
    public init(
        name: String = "afm-bridge-out", maxQueuedBytes: Int = BridgeOutbox.defaultMaxQueuedBytes,
        deliver: @escaping Deliver, onHostGone: @escaping @Sendable () -> Void = {}
    ) throws(SystemCallError) {
        self.maxQueuedBytes = maxQueuedBytes
        self.deliver = deliver
        self.onHostGone = onHostGone
        let thread = try IOThread.spawn(name: name) { [self] in run() }
        state.withLock { $0.thread = thread }
    }

    /// Queues one message (a JSON-RPC response or notification); false when it was not queued: after
    /// ``finish()``, or when it is `droppable` and the queue already holds ``maxQueuedBytes``.
    @discardableResult
    public func send(_ message: JSONValue, droppable: Bool = false) -> Bool {
        let bytes = message.encoded()
        let queued = state.withLock { state in
            guard !state.finished else { return false }
            if droppable && state.queuedBytes + bytes.count > maxQueuedBytes { return false }
            state.queue.append(bytes)
            state.queuedBytes += bytes.count
            return true
        }
        if queued { wake.signal() }
        return queued
    }

    /// The bytes of the messages waiting for the host.
    public var queuedBytes: Int { state.withLock { $0.queuedBytes } }

    /// Whether the caller runs on the delivery thread (inside a delivery).
    public var isDeliveryThread: Bool { state.withLock { $0.thread?.isCurrent ?? false } }

    /// Delivers what is queued, then stops the thread and waits for it; ``send(_:)`` is ignored from now on.
    /// Idempotent. Must not be called on the delivery thread (it would wait for itself).
    public func finish() {
        let thread = state.withLock { state -> IOThread? in
            state.finished = true
            guard !state.joining else { return nil }
            state.joining = true
            return state.thread
        }
        wake.signal()
        guard let thread else { return }
        thread.join()
        // Only now: until the thread ended, a callback running on it must still be known as the delivery thread
        // (libafm-bridge.so's close-cycle check asks while a close waits here; before, it was forgotten at once and
        // two callbacks closing each other's handles could deadlock).
        state.withLock { $0.thread = nil }
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
                state.queuedBytes -= message.count
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
