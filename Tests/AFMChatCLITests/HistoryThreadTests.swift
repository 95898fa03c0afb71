// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Synchronization
import Testing

@testable import AFMWebChat

/// The web chat's history thread: every job queued before ``HistoryThread/close()`` runs with the store, every job
/// queued after it fails at once; none is left waiting.
@Suite struct HistoryThreadTests {
    final class Box: Sendable {
        let value = Mutex<Int?>(nil)
    }

    /// Before: a job queued while the thread ran a batch, with the close arriving before that batch ended, was never
    /// run (the thread read the close after the batch and left); its caller (a turn saving its answer at shutdown)
    /// waited forever.
    @Test func aJobQueuedDuringTheLastBatchStillRuns() throws {
        let history = try HistoryThread(directory: TestPaths.makeTemporaryDirectory("afm-history-thread"))
        let running = DispatchSemaphore(value: 0)
        history.submit { _ in
            running.signal()
            usleep(300_000)
        }
        running.wait()
        let answered = DispatchSemaphore(value: 0)
        let count = Box()
        Thread {
            let value = try? history.performBlocking { try $0.conversationCount() }
            count.value.withLock { $0 = value }
            answered.signal()
        }.start()
        usleep(50_000)  // the late job is queued while the first batch still runs
        history.close()
        #expect(answered.wait(timeout: .now() + 5) == .success, "the job queued before the close never ran")
        #expect(count.value.withLock { $0 } == 0)
        // After the close a job fails at once.
        #expect(throws: (any Error).self) { try history.performBlocking { try $0.conversationCount() } }
    }

    /// A second close (``WebChatServer/stop()`` called twice) returns at once. Before, it waited forever for a thread
    /// that had already ended.
    @Test func closingTwiceReturns() throws {
        let history = try HistoryThread(directory: TestPaths.makeTemporaryDirectory("afm-history-thread"))
        history.close()
        let closed = DispatchSemaphore(value: 0)
        Thread {
            history.close()
            closed.signal()
        }.start()
        #expect(closed.wait(timeout: .now() + 5) == .success, "the second close never returned")
    }

    /// Closing from async code suspends instead of blocking a cooperative-pool thread. The last job before the close
    /// waits for a probe task to run; with as many closes pending as the pool has threads, a close that blocked its
    /// thread (as ``WebChatServer/stop()`` did) would leave the probe no thread until the job gave up after 10 s.
    @Test func anAsyncCloseLeavesThePoolFree() async throws {
        let history = try HistoryThread(directory: TestPaths.makeTemporaryDirectory("afm-history-thread"))
        let probeRan = DispatchSemaphore(value: 0)
        let sawProbe = Box()
        let jobRunning = DispatchSemaphore(value: 0)
        history.submit { _ in
            jobRunning.signal()
            let ran = probeRan.wait(timeout: .now() + 10) == .success
            sawProbe.value.withLock { $0 = ran ? 1 : 0 }
        }
        jobRunning.wait()
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(2, ProcessInfo.processInfo.activeProcessorCount) {
                group.addTask { await history.close() }
            }
            group.addTask {
                try? await Task.sleep(for: .milliseconds(100))  // the closes start first
                probeRan.signal()
            }
        }
        #expect(sawProbe.value.withLock { $0 } == 1, "the probe task found no free thread while the closes waited")
    }
}
