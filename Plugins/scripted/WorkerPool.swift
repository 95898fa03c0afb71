// SPDX-License-Identifier: Apache-2.0
import Foundation
import Synchronization

/// Long-lived threads that run generations, so a request does not pay for creating a thread.
///
/// A generation may block for a long time (delays, `hang`, or `emit` waiting for a slow client), so the pool never
/// queues work behind a busy thread: a job goes to an idle thread, or a new thread is started for it. Threads
/// stay for reuse until `stop()`, which ends and joins them all (the ABI's `destroy` must join every thread).
final class WorkerPool: Sendable {
    typealias Job = @Sendable () -> Void

    /// One thread's wake-up. Each idle thread sleeps on its own semaphore so that `submit` can wake the one that
    /// went idle last: its stack and caches are still warm, and under a steady load the same few threads serve
    /// every generation instead of all of them taking turns (a shared semaphore wakes the longest sleeper).
    private final class Worker: Sendable {
        let wakeup = DispatchSemaphore(value: 0)
    }

    private struct State {
        var jobs: [Job] = []
        var head = 0
        /// Idle threads, the most recently idle last.
        var idle: [Worker] = []
        var stopping = false
    }

    private let state = Mutex(State())
    private let threads = DispatchGroup()
    private let name: String

    init(name: String) {
        self.name = name
    }

    /// Runs `job` on an idle thread, or on a new one when none is idle.
    func submit(_ job: @escaping Job) {
        let idle = state.withLock { state -> Worker? in
            state.jobs.append(job)
            return state.idle.popLast()
        }
        if let idle {
            idle.wakeup.signal()
            return
        }
        threads.enter()
        let worker = Worker()
        let thread = Thread { [self] in work(as: worker) }
        thread.name = name
        thread.start()
    }

    private enum Next {
        case run(Job)
        case wait
        case exit
    }

    private func work(as worker: Worker) {
        while true {
            let next = state.withLock { state -> Next in
                if state.head < state.jobs.count {
                    let job = state.jobs[state.head]
                    state.head += 1
                    if state.head == state.jobs.count {
                        state.jobs.removeAll(keepingCapacity: true)
                        state.head = 0
                    }
                    return .run(job)
                }
                if state.stopping { return .exit }
                state.idle.append(worker)
                return .wait
            }
            switch next {
            case .run(let job): job()
            // Another thread may take the job this wake-up was for; the loop then just goes idle again.
            case .wait: worker.wakeup.wait()
            case .exit:
                threads.leave()
                return
            }
        }
    }

    /// Ends every thread once the queued jobs ran, and waits for them.
    func stop() {
        let idle = state.withLock { state -> [Worker] in
            state.stopping = true
            defer { state.idle = [] }
            return state.idle
        }
        for worker in idle { worker.wakeup.signal() }
        threads.wait()
    }
}
