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

    private struct State {
        var jobs: [Job] = []
        var head = 0
        var idle = 0
        var stopping = false
    }

    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)
    private let threads = DispatchGroup()
    private let name: String

    init(name: String) {
        self.name = name
    }

    /// Runs `job` on an idle thread, or on a new one when none is idle.
    func submit(_ job: @escaping Job) {
        let reuse = state.withLock { state -> Bool in
            state.jobs.append(job)
            guard state.idle > 0 else { return false }
            state.idle -= 1
            return true
        }
        if reuse {
            wakeup.signal()
            return
        }
        threads.enter()
        let thread = Thread { [self] in work() }
        thread.name = name
        thread.start()
    }

    private enum Next {
        case run(Job)
        case wait
        case exit
    }

    private func work() {
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
                state.idle += 1
                return .wait
            }
            switch next {
            case .run(let job): job()
            case .wait: wakeup.wait()
            case .exit:
                threads.leave()
                return
            }
        }
    }

    /// Ends every thread once the queued jobs ran, and waits for them.
    func stop() {
        let idle = state.withLock { state -> Int in
            state.stopping = true
            defer { state.idle = 0 }
            return state.idle
        }
        for _ in 0..<idle { wakeup.signal() }
        threads.wait()
    }
}
