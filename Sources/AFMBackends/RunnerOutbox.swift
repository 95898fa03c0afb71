// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Dispatch
import Synchronization

/// The runner's outgoing frames: backend threads append, one writer thread sends.
///
/// An `emit` then costs an append under a lock (and a wake-up only when the writer is idle) instead of a system
/// call: while the writer sends one batch, the next accumulates, so a fast backend's events leave in large writes
/// and the host's relay thread wakes once per batch, not once per token. Order is kept: every runner → host frame
/// (events and replies) goes through the outbox. Memory is bounded by the credit window of each generation.
final class RunnerOutbox: Sendable {
    private let channel: RunnerChannel
    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)

    struct State {
        var pending: [UInt8] = []
        var writerIdle = false
    }

    init(channel: RunnerChannel) {
        self.channel = channel
    }

    /// Starts the writer thread. It ends the process when the host stops reading (the channel failed).
    func start() throws(SystemCallError) {
        try IOThread.spawn(name: "afm-runner-out") { [self] in
            var batch: [UInt8] = []
            while true {
                let idle = state.withLock { state -> Bool in
                    if state.pending.isEmpty {
                        state.writerIdle = true
                        return true
                    }
                    swap(&batch, &state.pending)
                    return false
                }
                if idle {
                    wakeup.wait()
                    continue
                }
                guard channel.sendRaw(batch) else { CurrentProcess.exitImmediately(0) }  // the host is gone
                batch.removeAll(keepingCapacity: true)
            }
        }.detach()
    }

    /// Bytes queued and not yet taken by the writer thread (tests).
    var pendingByteCount: Int { state.withLock { $0.pending.count } }

    /// Queues one frame.
    func send(_ frame: RunnerFrame) {
        let wake = state.withLock { state -> Bool in
            frame.encode(into: &state.pending)
            defer { state.writerIdle = false }
            return state.writerIdle
        }
        if wake { wakeup.signal() }
    }
}
