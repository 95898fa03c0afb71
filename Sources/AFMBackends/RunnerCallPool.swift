// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Dispatch
import Synchronization

/// A bounded pool of the runner's own threads for calls that may run concurrently but must not multiply without
/// bound (`tokenize`): at most `maximumThreads` run at once, at most `maximumWaiting` more wait for a thread, and a
/// call beyond both is refused at once (the caller answers it `busy`).
///
/// A thread per call let any number of `count_tokens` requests (admission lets them all in with `MaxConcurrent=0`)
/// start as many tokenizing threads in the runner. The wait is bounded too: the host gives a `tokenize` reply 30 s
/// before it kills the runner as hung, so a long queue would turn a burst of counts into a restart. Threads start on
/// demand and then stay, like ``RunnerWorkThread`` (threads of the runner's own, for the nice value they inherit).
final class RunnerCallPool: Sendable {
    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var threads = 0
        /// Threads waiting for a job (a queued job takes one of them).
        var idle = 0
    }

    /// Starts a detached thread named `name` running `body`, or throws when none can be started.
    typealias Spawner = @Sendable (_ name: String, _ body: @escaping @Sendable () -> Void) throws -> Void

    /// The runner's spawner: a thread of its own (``IOThread``), detached.
    static let spawnThread: Spawner = { name, body in try IOThread.spawn(name: name, body).detach() }

    private let name: String
    private let maximumThreads: Int
    private let maximumWaiting: Int
    private let spawner: Spawner
    private let state = Mutex(State())
    private let wakeup = DispatchSemaphore(value: 0)

    /// - Parameter spawner: how a thread is started (tests pass one that fails).
    init(name: String, maximumThreads: Int, maximumWaiting: Int, spawner: @escaping Spawner = RunnerCallPool.spawnThread) {
        self.name = name
        self.maximumThreads = maximumThreads
        self.maximumWaiting = maximumWaiting
        self.spawner = spawner
    }

    /// Runs `job` on a thread of the pool, now or once one is free; false when the pool is full or no thread can be
    /// started (nothing runs).
    ///
    /// A new thread is only reserved (counted in `threads`) while it starts; its job is queued once it runs. Queued
    /// before, a job was taken by whichever thread woke first, so a failed start could not take back its own: it
    /// removed the last job queued (another submit's, accepted) while its own ran though refused.
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        enum Decision { case queued, spawn, refused }
        let decision = state.withLock { state -> Decision in
            // Every queued job will take an idle thread; beyond those, jobs wait for a busy one.
            let waiting = state.jobs.count - state.idle
            if waiting < 0 {
                state.jobs.append(job)
                return .queued
            }
            if state.threads < maximumThreads {
                state.threads += 1
                return .spawn
            }
            guard waiting < maximumWaiting else { return .refused }
            state.jobs.append(job)
            return .queued
        }
        switch decision {
        case .refused:
            return false
        case .queued:
            wakeup.signal()
            return true
        case .spawn:
            do {
                try spawner(name) { [self] in work() }
            } catch {
                state.withLock { $0.threads -= 1 }
                return false
            }
            // The new thread and its job arrive together: `waiting` is unchanged for other submits.
            state.withLock { state in
                state.idle += 1
                state.jobs.append(job)
            }
            wakeup.signal()
            return true
        }
    }

    private func work() {
        while true {
            wakeup.wait()
            let job = state.withLock { state in  // one signal per queued job
                state.idle -= 1
                return state.jobs.removeFirst()
            }
            job()
            state.withLock { $0.idle += 1 }
        }
    }
}
