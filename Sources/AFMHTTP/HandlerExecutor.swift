// SPDX-License-Identifier: Apache-2.0

import AFMSystem
import Dispatch

/// The task executor of request handlers: runs a handler's job on the thread that resumed it when that thread
/// granted ``InlineResumption``, and otherwise on libdispatch's global queue, as the default executor would.
///
/// ```
///  event loop: small request parsed ─► InlineResumption ─► Task(executorPreference:) ─► handler runs here
///                                                          until it first waits (for its backend)
///  backend thread: emit(terminal) ─► InlineResumption ─► continuation.resume ─► handler runs here:
///                                                          response built and sent, request cycle ended
///  any other thread: resume ─► enqueue ─► DispatchQueue.global ─► handler runs on a pool thread
/// ```
///
/// Why not the default executor: with it, a non-streaming request through an in-process backend crossed
/// threads three times (loop → pool thread → backend thread → pool thread); now it crosses once (loop → backend
/// thread, which the ABI requires). Each crossing was a wake-up and a context switch, and on two busy cores
/// they were a fifth of the daemon's CPU per request (docs/PERFORMANCE.md). Jobs handed to libdispatch are run
/// as jobs of this executor, so the task does not hop again at its next suspension point.
final class HandlerExecutor: TaskExecutor {
    static let shared = HandlerExecutor()

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        if InlineResumption.isPermitted {
            // Withdrawn while the job runs: whatever the handler resumes in turn is not run nested here.
            InlineResumption.with(permitted: false) { job.runSynchronously(on: asUnownedTaskExecutor()) }
        } else {
            DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
        }
    }
}
