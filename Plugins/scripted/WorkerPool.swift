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

    /// One thread's hand-off slot and wake-up. Each idle thread sleeps on its own semaphore so that `submit` can
    /// wake the one that went idle last: its stack and caches are still warm, and under a steady load the same
    /// few threads serve every generation instead of all of them taking turns (a shared semaphore wakes the
    /// longest sleeper). The job travels in the thread's own slot, so the pool's lock is taken once per
    /// `submit` and once per finished job (a shared queue took it three times per job, and it was contended).
    private final class Worker: Sendable {
        let wakeup = DispatchSemaphore(value: 0)
        /// The job `submit` handed over; nil after a wake-up means "stop".
        let slot = Mutex<Job?>(nil)
    }

    private struct State {
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
        if let idle = state.withLock({ $0.idle.popLast() }) {
            idle.slot.withLock { $0 = job }
            idle.wakeup.signal()
            return
        }
        threads.enter()
        let worker = Worker()
        let thread = Thread { [self] in work(as: worker, first: job) }
        thread.name = name
        thread.start()
    }

    private func work(as worker: Worker, first: Job) {
        var job = first
        while true {
            job()
            let stopping = state.withLock { state -> Bool in
                if state.stopping { return true }
                state.idle.append(worker)
                return false
            }
            if !stopping {
                // A submit may pop this worker and signal before the wait starts; the semaphore keeps the signal.
                worker.wakeup.wait()
                if let next = worker.slot.withLock({ slot -> Job? in defer { slot = nil }; return slot }) {
                    job = next
                    continue
                }
            }
            threads.leave()
            return
        }
    }

    /// Ends every thread (running jobs finish first) and waits for them.
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
