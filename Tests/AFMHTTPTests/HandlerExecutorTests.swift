// SPDX-License-Identifier: Apache-2.0
@testable import AFMHTTP
import AFMSystem
import Glibc
import Synchronization
import Testing

/// Where a handler task continues after a continuation is resumed: on the resuming thread when that thread
/// grants `InlineResumption`, on a pool thread otherwise.
@Suite struct HandlerExecutorTests {
    /// A continuation parked by a task, and the thread that ran the task after it was resumed.
    private final class Parking: Sendable {
        let continuation = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let resumedOn = Mutex<pthread_t?>(nil)
        let resumer = Mutex<pthread_t?>(nil)
        let sawPermission = Mutex<Bool?>(nil)
    }

    /// Starts a handler-executor task that parks, resumes it from a new thread (with or without the permission)
    /// and returns whether the task continued on that thread.
    private func continuesOnResumingThread(permitted: Bool) async throws -> Bool {
        let parking = Parking()
        let task = Task(executorPreference: HandlerExecutor.shared) {
            await withCheckedContinuation { continuation in parking.continuation.withLock { $0 = continuation } }
            parking.resumedOn.withLock { $0 = pthread_self() }
        }
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: .seconds(5))
        while parking.continuation.withLock({ $0 == nil }) && clock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        let continuation = try #require(parking.continuation.withLock { $0 })
        let thread = try IOThread.spawn(name: "test-resumer") {
            parking.resumer.withLock { $0 = pthread_self() }
            InlineResumption.with(permitted: permitted) { continuation.resume() }
            // The permission is restored after the call, and withdrawn inside it (checked by the task's thread).
            precondition(!InlineResumption.isPermitted)
        }
        thread.join()
        await task.value
        let resumedOn = try #require(parking.resumedOn.withLock { $0 })
        let resumingThread = try #require(parking.resumer.withLock { $0 })
        return pthread_equal(resumedOn, resumingThread) != 0
    }

    @Test func runsAResumedTaskOnTheResumingThreadWhenPermitted() async throws {
        #expect(try await continuesOnResumingThread(permitted: true))
    }

    @Test func handsAResumedTaskToThePoolOtherwise() async throws {
        #expect(try await continuesOnResumingThread(permitted: false) == false)
    }

    @Test func withdrawsThePermissionWhileATaskRunsInline() async throws {
        let parking = Parking()
        let task = Task(executorPreference: HandlerExecutor.shared) {
            await withCheckedContinuation { continuation in parking.continuation.withLock { $0 = continuation } }
            parking.sawPermission.withLock { $0 = InlineResumption.isPermitted }
        }
        while parking.continuation.withLock({ $0 == nil }) { try await Task.sleep(for: .milliseconds(1)) }
        let continuation = try #require(parking.continuation.withLock { $0 })
        let thread = try IOThread.spawn(name: "test-resumer") {
            InlineResumption.with(permitted: true) { continuation.resume() }
        }
        thread.join()
        await task.value
        #expect(parking.sawPermission.withLock { $0 } == false)
    }
}
