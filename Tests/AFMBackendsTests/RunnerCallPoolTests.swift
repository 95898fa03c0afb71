// SPDX-License-Identifier: Apache-2.0
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import AFMBackends

/// The runner's bounded pool for `tokenize` calls (RunnerCallPool): a call it refuses never runs, and every call it
/// accepts runs, even when a thread cannot be started.
@Suite struct RunnerCallPoolTests {
    struct SpawnFailure: Error {}

    /// A submit whose thread cannot be started is refused, and its job never runs; another submit made while that
    /// thread was being started still runs its own job. Before, the failed submit's rollback removed the last queued
    /// job (the other one's), while a worker had already taken its own: the refused job ran (the runner would have
    /// sent two replies for its call) and the accepted one never did (its call waited until the host's deadline).
    @Test func aThreadThatCannotStartRefusesOnlyItsOwnJob() throws {
        let enteredFirstSpawn = DispatchSemaphore(value: 0)
        let releaseFirstSpawn = DispatchSemaphore(value: 0)
        let spawns = Atomic<Int>(0)
        let pool = RunnerCallPool(name: "test-pool", maximumThreads: 2, maximumWaiting: 4) { name, body in
            if spawns.add(1, ordering: .relaxed).oldValue == 0 {
                enteredFirstSpawn.signal()
                releaseFirstSpawn.wait()
                throw SpawnFailure()
            }
            try RunnerCallPool.spawnThread(name, body)
        }
        let ran = Mutex<[String]>([])
        let secondRan = DispatchSemaphore(value: 0)
        let firstAccepted = Mutex<Bool?>(nil)
        let firstReturned = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            let accepted = pool.submit { ran.withLock { $0.append("first") } }
            firstAccepted.withLock { $0 = accepted }
            firstReturned.signal()
        }
        #expect(enteredFirstSpawn.wait(timeout: .now() + 10) == .success)
        let secondAccepted = pool.submit {
            ran.withLock { $0.append("second") }
            secondRan.signal()
        }
        #expect(secondAccepted)
        #expect(secondRan.wait(timeout: .now() + 10) == .success, "the accepted job did not run: \(ran.withLock { $0 })")
        releaseFirstSpawn.signal()
        #expect(firstReturned.wait(timeout: .now() + 10) == .success)
        #expect(firstAccepted.withLock { $0 } == false)
        // A job submitted now runs after anything still queued: the refused job must not be among them.
        let lastRan = DispatchSemaphore(value: 0)
        #expect(pool.submit { lastRan.signal() })
        #expect(lastRan.wait(timeout: .now() + 10) == .success)
        #expect(ran.withLock { $0 } == ["second"])
    }
}
