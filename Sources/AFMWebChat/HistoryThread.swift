// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMSystem
import Dispatch
import Synchronization

/// The web chat's one ``HistoryStore``, opened on a thread of its own that runs every store call in order.
///
/// Why a thread: a store's SQLite connection is used by one thread at a time and every call blocks while SQLite
/// works, so it must not run on the cooperative pool; request handlers hand it jobs (``perform(_:)``) and await
/// them, and a turn's answering thread uses ``performBlocking(_:)``.
final class HistoryThread: Sendable {
    private typealias Job = @Sendable (HistoryStore?) -> Void

    /// The jobs waiting for the thread and the request to close, under one lock: a job is either queued before the
    /// close (and run with the store) or sees the close (and runs without it), never left in a queue no one reads.
    private final class Queue: Sendable {
        struct State {
            var jobs: [Job] = []
            var closing = false
        }
        let state = Mutex(State())
        let wake = DispatchSemaphore(value: 0)
        /// Entered at open, left by the thread once the store is released: every ``close()`` waits on it (a
        /// semaphore would answer the first close only, and a second would wait forever).
        let ended = DispatchGroup()
    }

    private let queue = Queue()
    /// The image files (their directory is fixed at open), readable from any thread.
    let images: ImageFileStore
    /// The data directory.
    let directory: String

    /// Opens the history in `directory` on a new thread.
    init(directory: String) throws {
        self.directory = directory
        let opened = Mutex<Result<ImageFileStore, any Error>?>(nil)
        let ready = DispatchSemaphore(value: 0)
        let queue = self.queue
        queue.ended.enter()
        try IOThread.spawn(name: "afm-web-history") {
            var store: HistoryStore?
            do {
                let open = try HistoryStore(directory: directory)
                store = open
                opened.withLock { $0 = .success(open.images) }
            } catch {
                opened.withLock { $0 = .failure(error) }
            }
            ready.signal()
            while store != nil {
                queue.wake.wait()
                // The jobs and the close are read together: every job queued before the close is in this batch.
                let (batch, closing) = queue.state.withLock { state in
                    let taken = state.jobs
                    state.jobs = []
                    return (taken, state.closing)
                }
                for job in batch { job(store) }
                if closing { store = nil }  // released here, on its thread: it removes its lease file
            }
            queue.ended.leave()
        }.detach()
        ready.wait()
        let result = opened.withLock { $0 } ?? .failure(HistoryError("the history thread did not start"))
        images = try result.get()
    }

    /// Closes the store (after the jobs queued so far); later jobs fail. Blocks until the thread has released the
    /// store: for threads that may block, never the cooperative pool (use the `async` overload there).
    func close() {
        requestClose()
        queue.ended.wait()
    }

    /// ``close()`` for async callers: suspends, instead of blocking a cooperative-pool thread, until the thread has
    /// run the jobs queued so far and released the store.
    func close() async {
        requestClose()
        let ended = queue.ended
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            ended.notify(queue: .global()) { continuation.resume() }
        }
    }

    private func requestClose() {
        queue.state.withLock { $0.closing = true }
        queue.wake.signal()
    }

    private func enqueue(_ job: @escaping Job) {
        let queued = queue.state.withLock { state in
            guard !state.closing else { return false }
            state.jobs.append(job)
            return true
        }
        guard queued else { return job(nil) }
        queue.wake.signal()
    }

    /// Runs `body` with the store on the history thread and returns its result.
    func perform<T: Sendable>(_ body: @escaping @Sendable (HistoryStore) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            enqueue { store in
                guard let store else { return continuation.resume(throwing: HistoryError("the history is closed")) }
                continuation.resume(with: Result { try body(store) })
            }
        }
    }

    /// ``perform(_:)`` for a thread that may block (a turn's answering thread), never the cooperative pool.
    func performBlocking<T: Sendable>(_ body: @escaping @Sendable (HistoryStore) throws -> T) throws -> T {
        let result = Mutex<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        enqueue { store in
            let outcome: Result<T, any Error> = store.map { store in Result { try body(store) } } ?? .failure(HistoryError("the history is closed"))
            result.withLock { $0 = outcome }
            done.signal()
        }
        done.wait()
        let outcome = result.withLock { $0 } ?? .failure(HistoryError("the history is closed"))
        return try outcome.get()
    }

    /// Queues `body` without waiting for it (saving streamed text).
    func submit(_ body: @escaping @Sendable (HistoryStore) -> Void) {
        enqueue { store in
            if let store { body(store) }
        }
    }
}
