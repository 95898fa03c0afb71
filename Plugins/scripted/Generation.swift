// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Dispatch
import Synchronization

/// One accepted generation: the request, the model it plays, the host's sink and the cancellation state.
///
/// `cancel()` may arrive on any host thread; the generation thread checks `isCancelled` between steps and sleeps
/// only through `sleep(milliseconds:)` and `waitUntilCancelled()`, which a cancel wakes at once. There is never a
/// long uninterruptible sleep, so a cancelled generation ends within a few milliseconds.
final class Generation: Sendable {
    /// The host's id for this request, unique per instance.
    let requestID: UInt64
    /// The request document's relevant parts.
    let request: GenerationRequest
    /// The model whose steps are played.
    let model: ScriptModel
    /// Where events go.
    let sink: EventSink

    private let cancelled = Atomic<Bool>(false)
    /// Signalled once, by the first `cancel()`. Every wait checks `cancelled` first, so one signal is enough.
    private let wakeup = DispatchSemaphore(value: 0)

    init(requestID: UInt64, request: GenerationRequest, model: ScriptModel, sink: EventSink) {
        self.requestID = requestID
        self.request = request
        self.model = model
        self.sink = sink
    }

    /// True once `cancel()` was called.
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Requests cancellation and wakes a sleeping generation thread. Idempotent.
    ///
    /// - Returns: true for the call that actually cancelled.
    @discardableResult
    func cancel() -> Bool {
        guard !cancelled.exchange(true, ordering: .acquiringAndReleasing) else { return false }
        wakeup.signal()
        return true
    }

    /// Waits `milliseconds`, or less if cancelled.
    func sleep(milliseconds: Int) {
        guard milliseconds > 0, !isCancelled else { return }
        _ = wakeup.wait(timeout: .now() + .milliseconds(milliseconds))
    }

    /// Waits until `cancel()` is called.
    func waitUntilCancelled() {
        while !isCancelled { wakeup.wait() }
    }
}
