// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends
import AFMCore
import AFMSystem
import AFMTestSupport
import Foundation
import Synchronization
import Testing

/// The host's guarantees about a generation's event stream, shown with misbehaving fixture backends.
@Suite struct GenerationTests {
    @Test(arguments: Hosting.both) func watchdogCutsOffABackendThatNeverSendsItsTerminalEvent(hosting: String) async throws {
        let harness = RegistryHarness(limits: GenerationLimits(silenceLimit: .milliseconds(500), cancelGrace: .milliseconds(500)))
        try harness.directory.addCFixture(hosting: hosting)
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-no-terminal")
        let retiredBefore = GenerationTable.shared.retiredSinkCount
        let started = ContinuousClock.now
        let events = await collect(try lease.start(requestDocument: requestDocument(model: "c-no-terminal")))
        let elapsed = ContinuousClock.now - started
        guard case .failed(let code, let message)? = events.last else {
            Issue.record("expected a synthesized failure, got \(events)")
            return
        }
        #expect(code == .timeout)
        #expect(message.contains("cut off"))
        #expect(elapsed < .seconds(5))
        #expect(events.filter(\.isTerminal).count == 1)
        // The lease was released: the generation has nothing in flight.
        #expect(await eventually { harness.status("c-fixture")?.inflight == 0 })
        // In process, the cut-off generation's sink is retired for good (the backend may still call it), and stays
        // referenced: dropping it was LeakSanitizer's report at the end of `make test-asan-ci`.
        if hosting == "in-process" {
            #expect(GenerationTable.shared.retiredSinkCount > retiredBefore)
        }
    }

    @Test(arguments: Hosting.both) func eventsAfterTheTerminalEventAreIgnored(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        for _ in 0..<3 {
            let lease = try harness.registry.lease(model: "c-after-terminal")
            let events = await collect(try lease.start(requestDocument: requestDocument(model: "c-after-terminal")))
            #expect(text(of: events) == "hi")
            #expect(events.filter(\.isTerminal) == [.done(.stop)])
        }
        // The backend is still healthy afterwards.
        let lease = try harness.registry.lease(model: "c-echo")
        #expect(text(of: await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "still fine")))) == "still fine")
    }

    @Test(arguments: Hosting.both) func backendErrorsArriveWithTheirCode(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-error")
        let events = await collect(try lease.start(requestDocument: requestDocument(model: "c-error")))
        #expect(events.last == .failed(.rateLimited, message: "fixture rate limit"))
    }

    @Test(arguments: Hosting.both) func cancelStopsTheBackendPromptly(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-slow")
        let stream = try lease.start(requestDocument: requestDocument(model: "c-slow"))
        var iterator = stream.makeAsyncIterator()
        _ = await iterator.next()
        let cancelledAt = ContinuousClock.now
        stream.cancel()
        var last: BackendEvent?
        while let event = await iterator.next() { last = event }
        #expect(last == .done(.cancelled))
        // In-process the stop takes well under a millisecond; through a runner it crosses two processes and this
        // test's own consumer task, which a parallel test run has delayed by seconds (2.96 s once on 2 cores).
        // The scripted disconnect tests bound the stop itself at 100 ms.
        #expect(ContinuousClock.now - cancelledAt < (hosting == "runner" ? .seconds(5) : .milliseconds(500)))
    }

    @Test(arguments: Hosting.both) func aSlowConsumerBlocksTheBackendInsteadOfGrowingTheBuffer(hosting: String) async throws {
        let harness = RegistryHarness()
        let script = try harness.writeScript(model: "flood", steps: #"[{"repeat":5000,"steps":[{"text":"x"}]}]"#)
        try harness.directory.addScripted(hosting: hosting)
        let registry = RegistryHarness(directory: harness.directory, settings: ["scripted": ["Script": script]])
        await registry.registry.loadAll()
        let lease = try registry.registry.lease(model: "flood")
        let stream = try lease.start(requestDocument: requestDocument(model: "flood", maxOutputTokens: 100_000))
        // Read nothing for a while: the backend fills the buffer and then must wait inside emit().
        try await Task.sleep(for: .milliseconds(300))
        let pending = stream.pendingCount
        #expect(pending <= stream.capacity)
        var count = 0
        for await event in stream {
            if case .textDelta = event { count += 1 }
            #expect(stream.pendingCount <= stream.capacity)
        }
        #expect(count == 5000)
    }

    /// docs/backend-abi.md §5: a backend may send a whole answer of at most 64 events from inside `generate`, and
    /// the host takes them all without blocking, in either hosting. The scripted backend does so for answers that
    /// never wait: every event, the terminal one included, is already in the stream when `start` returns. An
    /// answer with a delay, or one longer than 64 events, is played on a backend thread and arrives complete too.
    @Test(arguments: Hosting.both) func aWholeAnswerSentFromInsideGenerateArrivesIntact(hosting: String) async throws {
        let harness = RegistryHarness()
        let path = harness.root + "/immediate.json"
        // "immediate": 59 text deltas + a tool call (BEGIN, one ARGUMENTS, END) + USAGE + DONE = 64 events, the limit.
        // "too-long": 63 deltas + USAGE + DONE = 65.
        let script = """
            {"script_version":1,"models":[
             {"id":"immediate","steps":[{"repeat":59,"steps":[{"text":"x"}]},{"tool_call":{"name":"f","call_id":"c","arguments":"{}"}}]},
             {"id":"too-long","steps":[{"repeat":63,"steps":[{"text":"y"}]}]},
             {"id":"delayed","steps":[{"text":"a"},{"delay_ms":300},{"text":"b"}]}]}
            """
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        try harness.directory.addScripted(hosting: hosting)
        let registry = RegistryHarness(directory: harness.directory, settings: ["scripted": ["Script": path]])
        await registry.registry.loadAll()

        let immediate = try registry.registry.lease(model: "immediate").start(requestDocument: requestDocument(model: "immediate"))
        #expect(immediate.pendingCount == 64, "all 64 events were sent from inside generate")
        let events = await collect(immediate)
        #expect(text(of: events) == String(repeating: "x", count: 59))
        #expect(events.filter(\.isTerminal) == [.done(.toolCalls)])

        let tooLong = try registry.registry.lease(model: "too-long").start(requestDocument: requestDocument(model: "too-long"))
        #expect(text(of: await collect(tooLong)) == String(repeating: "y", count: 63))

        let delayed = try registry.registry.lease(model: "delayed").start(requestDocument: requestDocument(model: "delayed"))
        #expect(delayed.pendingCount < 4, "a delayed answer is not complete when generate returns")
        #expect(text(of: await collect(delayed)) == "ab")
        #expect(await eventually { registry.status("scripted")?.inflight == 0 })
    }

    /// A consumer that asked for it is offered the emitting thread (the `InlineResumption` permission) when an
    /// in-process backend resumes it; runner hosting never offers the relay thread, and nobody else is offered it.
    @Test(arguments: Hosting.both, [true, false])
    func anInlineConsumerIsOfferedTheEmittingThread(hosting: String, asks: Bool) async throws {
        let harness = RegistryHarness()
        let script = try harness.writeScript(
            model: "paced", steps: #"[{"text":"a"},{"delay_ms":300},{"text":"b"},{"delay_ms":300}]"#)
        try harness.directory.addScripted(hosting: hosting)
        let registry = RegistryHarness(directory: harness.directory, settings: ["scripted": ["Script": script]])
        await registry.registry.loadAll()
        let lease = try registry.registry.lease(model: "paced")
        let stream = try lease.start(requestDocument: requestDocument(model: "paced"))
        let executor = PermissionRecordingExecutor()
        let events = await Task(executorPreference: executor) {
            if asks { stream.resumeConsumerOnEmittingThread() }
            return await collect(stream)
        }.value
        #expect(text(of: events) == "ab")
        // The delays make the consumer wait for "b" and for the terminal event, so it is resumed at least twice.
        let grants = executor.grants.withLock { $0 }
        #expect(grants.contains(true) == (asks && hosting == "in-process"))
    }
}

extension GenerationTests {
    /// A backend that sends its terminal event from inside `cancel` (like `c-cancel-inline`) must not get an inline
    /// consumer run inside that call: the consumer would run on the thread that cancelled (an event loop, the drain
    /// deadline's control queue), inside the backend's `cancel`.
    @Test func anInlineConsumerIsNotResumedInsideTheHostsCancel() async throws {
        let box = Mutex<GenerationStream?>(nil)
        let stream = GenerationStream(
            id: 6, silenceLimit: .seconds(60), cancelGrace: .seconds(5),
            onCancel: { _ = box.withLock { $0 }?.receive(.done(.cancelled)) },  // on the cancelling thread
            onTerminal: { _ in })
        box.withLock { $0 = stream }
        // The stream holds `onCancel`, which holds the box: emptied at the end, or the three stay in a cycle
        // (LeakSanitizer's indirect leak from this test's GenerationStream, make test-asan-ci).
        defer { box.withLock { $0 = nil } }
        stream.armCancel()
        let executor = PermissionRecordingExecutor()
        let consumer = Task(executorPreference: executor) {
            stream.resumeConsumerOnEmittingThread()
            return await collect(stream)
        }
        #expect(await eventually { stream.isConsumerWaiting })
        stream.cancel()
        #expect(await consumer.value == [.done(.cancelled)])
        #expect(executor.grants.withLock { $0 }.contains(true) == false)
    }
}

/// Records, for every job, whether the enqueuing thread granted `InlineResumption`; runs jobs on the pool.
private final class PermissionRecordingExecutor: TaskExecutor {
    let grants = Mutex<[Bool]>([])

    func enqueue(_ job: consuming ExecutorJob) {
        grants.withLock { $0.append(InlineResumption.isPermitted) }
        let job = UnownedJob(job)
        DispatchQueue.global().async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
