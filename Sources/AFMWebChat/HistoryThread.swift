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

    /// The jobs waiting for the thread, and the request to close.
    private final class Queue: Sendable {
        let jobs = Mutex<[Job]>([])
        let closing = Mutex<DispatchSemaphore?>(nil)
        let wake = DispatchSemaphore(value: 0)
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
                let batch = queue.jobs.withLock { jobs in
                    let taken = jobs
                    jobs = []
                    return taken
                }
                for job in batch { job(store) }
                if let done = queue.closing.withLock({ $0 }) {
                    store = nil  // released here, on its thread: it removes its lease file
                    done.signal()
                }
            }
        }.detach()
        ready.wait()
        let result = opened.withLock { $0 } ?? .failure(HistoryError("the history thread did not start"))
        images = try result.get()
    }

    /// Closes the store (after the jobs queued so far); later jobs fail.
    func close() {
        let done = DispatchSemaphore(value: 0)
        queue.closing.withLock { $0 = done }
        queue.wake.signal()
        done.wait()
    }

    private func enqueue(_ job: @escaping Job) {
        if queue.closing.withLock({ $0 != nil }) {
            job(nil)
            return
        }
        queue.jobs.withLock { $0.append(job) }
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
