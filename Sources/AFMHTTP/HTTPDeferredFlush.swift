// SPDX-License-Identifier: Apache-2.0

import AFMSystem

/// Connections whose queued output an event-loop thread sends at the end of its current pass instead of at once.
///
/// Why: a request handled entirely on the loop thread (parsed, answered by a backend from inside `generate`,
/// encoded) used to be sent right away, and under load each of those `send`s woke the client's thread, which had
/// gone back to sleep since the previous one: a wake-up (an inter-processor interrupt, on a VM an exit to the
/// hypervisor) per response: `send` was a quarter of a loop thread's samples on the 2-core benchmark machine, most
/// of it that wake-up (docs/PERFORMANCE.md). Sending the pass's answers together wakes each client thread once per pass. A pass
/// handles what one `epoll_wait` returned, so an answer waits at most for the rest of that pass.
///
/// Only output produced *on a loop thread* is deferred, and only while the connection's queue stays under the
/// high watermark (a streaming writer that must wait for the queue to drain is flushed at once). Writers on other
/// threads (backend threads, the pool) send immediately as before.
final class HTTPDeferredFlush {
    /// The calling loop thread's list; nil on every other thread.
    static let slot = ThreadLocalReference<HTTPDeferredFlush>()

    private var pending: [HTTPConnection] = []

    /// Sends `connection`'s queue at the end of the pass. The caller holds its write token and a descriptor
    /// reference, which `HTTPConnection.flushDeferred()` then releases as an immediate flush would.
    func add(_ connection: HTTPConnection) {
        pending.append(connection)
    }

    /// Sends every deferred queue, including any deferred while doing so.
    func flushAll() {
        while !pending.isEmpty {
            let batch = pending
            pending.removeAll(keepingCapacity: true)
            for connection in batch { connection.flushDeferred() }
        }
    }
}
