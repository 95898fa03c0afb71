// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Dispatch
import Synchronization

/// A serial queue on one dedicated thread of the runner's own, instead of a libdispatch queue.
///
/// libdispatch sets the nice value of its worker threads by QoS, so a backend called from one (and every thread
/// the backend starts there: llama.cpp's decode thread and its OpenMP team) would run at nice 0 whatever
/// `RunnerNice` and afmd's own priority say. Threads of the runner's own inherit the main thread's value.
final class RunnerWorkThread: Sendable {
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let wakeup = DispatchSemaphore(value: 0)

    /// Starts the thread; it lives as long as the process.
    init(name: String) throws(SystemCallError) {
        try IOThread.spawn(name: name) { [self] in
            while true {
                wakeup.wait()
                let job = jobs.withLock { $0.removeFirst() }  // one signal per queued job
                job()
            }
        }.detach()
    }

    /// Runs `job` after every job queued before it.
    func async(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(job) }
        wakeup.signal()
    }

    /// Runs `job` on a new thread of the runner's own (calls that may run concurrently: `generate`, `tokenize`).
    /// Returns false when no thread could be started.
    static func detached(name: String, _ job: @escaping @Sendable () -> Void) -> Bool {
        do {
            try IOThread.spawn(name: name, job).detach()
            return true
        } catch {
            return false
        }
    }
}
