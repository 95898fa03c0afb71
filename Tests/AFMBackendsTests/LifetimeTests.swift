// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends
import AFMCore
import AFMSystem
import AFMTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing

/// When an instance may be destroyed, and when a generation's lease ends (docs/ARCHITECTURE.md, "Instance
/// lifetime"). The C fixture checks the host on every call: a call into a destroyed instance, or a `destroy` while
/// a `generate` or `cancel` on it is still running, aborts the process (in-process: this test process; in a runner:
/// the runner, which shows as a crash).
@Suite struct LifetimeTests {
    // MARK: - destroy never overlaps a call

    /// `c-inline` sends its whole answer from inside `generate` and then keeps the call open for up to a second,
    /// waiting for a `destroy`. Its lease is the old generation's last one, so a host that let the terminal event
    /// end the lease destroyed the instance while `generate` still ran.
    @Test(arguments: Hosting.both) func aGenerateThatAnswersInlineIsNotOverlappedByDestroy(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-inline")
        try await harness.registry.reload("c-fixture")  // generation 1 drains, with this one request in flight
        let stream = try lease.start(requestDocument: requestDocument(model: "c-inline", text: "1000"))
        let events = await collect(stream)
        #expect(text(of: events) == "inline")
        #expect(events.last == .done(.stop))
        #expect(await eventually { harness.status("c-fixture")?.draining.isEmpty == true })
        #expect(harness.status("c-fixture")?.crashes == 0)
        #expect(harness.status("c-fixture")?.state == "ready")
    }

    /// `c-cancel-inline` sends its terminal event from inside `cancel` (the sharpest form of a backend thread's
    /// terminal event racing the host's cancel) and keeps that call open for up to a second.
    @Test(arguments: Hosting.both) func aCancelThatMeetsTheTerminalEventIsNotOverlappedByDestroy(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-cancel-inline")
        try await harness.registry.reload("c-fixture")
        let stream = try lease.start(requestDocument: requestDocument(model: "c-cancel-inline", text: "1000"))
        stream.cancel()
        let events = await collect(stream)
        #expect(events == [.done(.cancelled)])
        #expect(await eventually { harness.status("c-fixture")?.draining.isEmpty == true })
        #expect(harness.status("c-fixture")?.crashes == 0)
    }

    /// Many requests on a draining generation, cancelled from other tasks while their terminal events arrive: the
    /// last one to end lets the instance go, and none of the cancels or generates may still be running then.
    @Test(arguments: Hosting.both) func cancelsRacingTerminalEventsNeverReachADestroyedInstance(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let rounds = hosting == "runner" ? 8 : 40
        let requests: [(model: String, text: String)] = [
            ("c-echo", "one two three four"), ("c-echo", "five"), ("c-inline", "3"), ("c-cancel-inline", "3"),
            ("c-slow", "x"), ("c-inline", "0"),
        ]
        for round in 0..<rounds {
            let leases = try requests.map { try harness.registry.lease(model: $0.model) }
            try await harness.registry.reload("c-fixture")
            let streams = try zip(leases, requests).map { lease, request in
                try lease.start(requestDocument: requestDocument(model: request.model, text: request.text))
            }
            let ends = await withTaskGroup(of: BackendEvent?.self) { group in
                for (index, stream) in streams.enumerated() {
                    // `c-cancel-inline` sends nothing until it is cancelled: never wait for its first event.
                    let waitsForCancel = requests[index].model == "c-cancel-inline"
                    group.addTask {
                        // Cancel at a different point of each stream: before its events, after the first one, or
                        // from another task while it is read; and once more after its end (harmless).
                        let mode = (index + round) % 3
                        if mode == 0 { stream.cancel() }
                        let racer = mode == 2 ? Task { stream.cancel() } : nil
                        var iterator = stream.makeAsyncIterator()
                        var last: BackendEvent?
                        if mode == 1 {
                            if !waitsForCancel { last = await iterator.next() }
                            stream.cancel()
                        }
                        while let event = await iterator.next() { last = event }
                        await racer?.value
                        stream.cancel()
                        return last
                    }
                }
                var ends: [BackendEvent?] = []
                for await end in group { ends.append(end) }
                return ends
            }
            #expect(ends.allSatisfy { $0?.isTerminal == true })
        }
        #expect(await eventually { harness.status("c-fixture")?.draining.isEmpty == true })
        #expect(harness.status("c-fixture")?.crashes == 0)
        #expect(harness.status("c-fixture")?.generation == UInt64(rounds + 1))
    }

    /// The stream's end (which releases the lease) waits for a `cancel` in flight: a terminal event that arrives
    /// during the call is buffered for the consumer at once, and the generation ends when `cancel` returns.
    @Test func theEndOfAGenerationWaitsForItsCancelCall() async throws {
        let ended = Atomic<Int>(0)
        let endedDuringCancel = Atomic<Bool>(false)
        let box = Mutex<GenerationStream?>(nil)
        let stream = GenerationStream(
            id: 1, silenceLimit: .seconds(60), cancelGrace: .seconds(5),
            onCancel: {
                // The backend's thread sends the terminal event while this call runs.
                let terminalSent = DispatchSemaphore(value: 0)
                let thread = Thread {
                    _ = box.withLock { $0 }?.receive(.done(.cancelled))
                    terminalSent.signal()
                }
                thread.start()
                terminalSent.wait()
                endedDuringCancel.store(ended.load(ordering: .acquiring) > 0, ordering: .releasing)
            },
            onTerminal: { _ in ended.add(1, ordering: .acquiringAndReleasing) })
        box.withLock { $0 = stream }
        // The stream holds `onCancel`, which holds the box: emptied at the end, or the three stay in a cycle
        // (LeakSanitizer's indirect leak from this test's GenerationStream, make test-asan-ci).
        defer { box.withLock { $0 = nil } }
        stream.armCancel()
        stream.cancel()
        #expect(endedDuringCancel.load(ordering: .acquiring) == false)
        #expect(ended.load(ordering: .acquiring) == 1)
        #expect(await collect(stream) == [.done(.cancelled)])
    }

    /// A terminal event sent from inside `generate` ends the generation only when `generate` returned.
    @Test func theEndOfAGenerationWaitsForGenerateToReturn() async {
        let ended = Atomic<Int>(0)
        let stream = GenerationStream(
            id: 2, silenceLimit: .seconds(60), cancelGrace: .seconds(5), onCancel: {},
            onTerminal: { _ in ended.add(1, ordering: .acquiringAndReleasing) })
        _ = stream.receive(.textDelta("inline"))
        _ = stream.receive(.done(.stop))
        #expect(stream.hasEnded)
        #expect(ended.load(ordering: .acquiring) == 0)
        stream.armCancel()  // `generate` returned
        #expect(ended.load(ordering: .acquiring) == 1)
        #expect(await collect(stream) == [.textDelta("inline"), .done(.stop)])
    }

    // MARK: - Leases

    /// A describe that drops a model (the fixture's `FIXTURE_MODELS_VANISH` build omits `c-echo` from every describe
    /// after the first) leaves the model index pointing at the generation until it is rebuilt. A lease asked for
    /// then must not stay counted on the generation.
    @Test func aModelThatVanishedFromTheDescriptionLeaksNoLease() async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(defines: ["FIXTURE_MODELS_VANISH"], hosting: "in-process")
        await harness.registry.loadAll()
        let probe = try harness.registry.lease(model: "c-error")
        let generation = probe.generation
        probe.release()
        #expect(await generation.refreshDescription())
        #expect(!generation.description.models.contains { $0.id == "c-echo" })

        #expect(throws: AFMError.self) { _ = try harness.registry.lease(model: "c-echo") }
        #expect(generation.snapshot.inflight == 0)
        // So it can still retire.
        try await harness.registry.reload("c-fixture")
        #expect(await eventually { generation.snapshot.phase == .retired })
    }

    /// A generation a reload replaced is forgotten by the registry when its drain ends (at once when idle, or when
    /// its last request ends), not kept with its runner host until the next switch. Failed before: generation 1 stayed
    /// in the slot's draining list after it retired.
    @Test(arguments: Hosting.both) func aRetiredGenerationIsForgottenWhenItsDrainEnds(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-inline")
        let first = lease.generation
        try await harness.registry.reload("c-fixture")  // generation 1 drains, with this one request in flight
        #expect(harness.registry.drainingGenerations("c-fixture") == [first.number])
        _ = await collect(try lease.start(requestDocument: requestDocument(model: "c-inline", text: "10")))
        #expect(await eventually { first.snapshot.phase == .retired })
        #expect(await eventually { harness.registry.drainingGenerations("c-fixture").isEmpty })
        // An idle generation retires as the switch drains it.
        try await harness.registry.reload("c-fixture")
        #expect(await eventually { harness.registry.drainingGenerations("c-fixture").isEmpty })
    }

    /// A generation shutdown gave up on (a request still in `generate` when the drain deadline and its second of
    /// grace passed) has retired, without destroy, when `drainAll` returns. Failed before: it retired (destroy and
    /// all) when that request ended, 3 s later, after `drainAll` had returned and while afmd would be exiting.
    @Test(arguments: Hosting.both) func aGenerationShutdownGaveUpOnHasRetiredWhenDrainAllReturns(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-slow-generate")
        let generation = lease.generation
        // `generate` sleeps 3 s; the drain deadline's cancel waits for it to return.
        let started = Task.detached {
            try lease.start(requestDocument: requestDocument(model: "c-slow-generate", text: "3000"))
        }
        try await Task.sleep(for: .milliseconds(200))
        await harness.registry.drainAll(deadline: .milliseconds(100))
        #expect(generation.hasFinishedRetiring, "drainAll returned before the generation retired")
        #expect(generation.snapshot.phase == .retired)
        #expect(harness.sink.capturedLines.contains { $0.contains("retired without destroy") })
        // A runner told to exit is not reported as a crash.
        #expect(!harness.sink.capturedLines.contains { $0.contains("backend runner died") })
        // In process the request still runs to its end; a runner was told to exit, which fails it.
        if hosting == "in-process" {
            _ = await collect(try await started.value)
        } else {
            _ = try? await started.value
        }
    }

    /// A replaced generation stays listed as draining until its destroy ran: `drainAll` waits only for the control
    /// queues of the generations it lists, so one forgotten while its destroy was still queued there would be torn
    /// down by afmd's exit in the middle of that destroy (review of f601f85, which forgot it as it retired).
    @Test(arguments: Hosting.both) func aReplacedGenerationIsListedUntilItsDestroyRan(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let lease = try harness.registry.lease(model: "c-echo")
        let first = lease.generation
        #expect(text(of: await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "x")))) == "x")
        // Hold the first generation's control queue: its retire (the destroy) queues behind this.
        let gate = DispatchSemaphore(value: 0)
        first.enqueueOnControlQueue { gate.wait() }
        try await harness.registry.reload("c-fixture")  // idle: it retires as the switch drains it
        #expect(first.snapshot.phase == .retired)
        #expect(!first.hasFinishedRetiring)
        #expect(harness.registry.drainingGenerations("c-fixture") == [first.number])
        // Shutdown now must wait for that destroy.
        let drained = Mutex(false)
        let registry = harness.registry
        let shutdown = Task {
            await registry.drainAll(deadline: .milliseconds(100))
            drained.withLock { $0 = true }
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(!drained.withLock { $0 })
        gate.signal()
        await shutdown.value
        #expect(first.hasFinishedRetiring)
        #expect(harness.registry.drainingGenerations("c-fixture").isEmpty)
    }

    /// A backend that sends its terminal event and then refuses breaks the contract; its sink must still reach the
    /// pool only once, or two later generations would share it after the quarantine.
    @Test func aTerminalEventThenARefusalRecyclesTheSinkOnce() async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(hosting: "in-process")
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-refuse-after-terminal")
        #expect(throws: AFMError.self) {
            _ = try lease.start(requestDocument: requestDocument(model: "c-refuse-after-terminal"))
        }
        #expect(!GenerationTable.shared.hasDuplicateRecycledSinks)
        #expect(harness.status("c-fixture")?.inflight == 0)
        // The instance is fine afterwards.
        let next = try harness.registry.lease(model: "c-echo")
        #expect(text(of: await collect(try next.start(requestDocument: requestDocument(model: "c-echo", text: "fine")))) == "fine")
    }

    /// The runner's side of the same breach: its relay gives the sink back with the terminal event, and the refusal
    /// that follows must not give it back again.
    @Test func aRunnerRelayGivesItsSinkBackOnce() throws {
        let (mine, theirs) = try FileDescriptor.makeSocketPair()
        let channel = RunnerChannel(descriptor: mine)
        defer {
            channel.close()
            theirs.close()
        }
        let relay = RunnerRelay(id: UInt64.max - 7, window: 4, outbox: RunnerOutbox(channel: channel))
        RunnerRelayTable.shared.insert(relay)
        _ = relay.emit(.done(.stop))
        relay.discard()  // `generate` refused after its terminal event
        #expect(!RunnerRelayTable.shared.sinks.hasDuplicateFreeEntries)
    }

    // MARK: - Runner deaths and shutdown around the switch

    /// A runner that dies after its generation was built and before the switch is found by neither the active nor
    /// a draining generation: the switch must not make it active, and a SIGHUP-style reload must repair it.
    @Test func aRunnerThatDiesBeforeTheSwitchIsNotActivated() async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(hosting: "runner")
        harness.registry.setBeforeSwitchHook { generation in
            guard generation.number == 1, let runner = generation.runnerHost else { return }
            kill(runner.child.pid, SIGKILL)
            _ = await eventually { !runner.isAlive }
        }
        await harness.registry.loadAll()
        harness.registry.setBeforeSwitchHook(nil)
        let status = try #require(harness.status("c-fixture"))
        #expect(status.generation == nil)
        #expect(status.reasonCode == "runner_failed")

        // SIGHUP: reload what changed; a backend without a working generation counts as changed.
        _ = await harness.registry.reloadChanged()
        let lease = try harness.registry.lease(model: "c-echo")
        #expect(text(of: await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "back")))) == "back")
    }

    /// A reload that finishes building while shutdown drains everything does not put its generation in service.
    /// The registry, shut down and dropped, is released (nothing of its own keeps it in a cycle).
    @Test func aReloadDuringShutdownDoesNotActivateItsGeneration() async throws {
        weak var released: BackendRegistry?
        do {
            let harness = RegistryHarness()
            try harness.directory.addCFixture(hosting: "in-process")
            await harness.registry.loadAll()
            let registry = harness.registry
            released = registry
            let sink = harness.sink
            // The generation's phase, and whether its retirement (destroy, then the "retired" line) was done, at
            // the moment `drainAll` returned.
            let atDrainEnd = Mutex<(phase: BackendGeneration.Phase, destroyed: Bool)?>(nil)
            registry.setBeforeSwitchHook { generation in
                await registry.drainAll(deadline: .milliseconds(100))
                let destroyed = sink.capturedLines.contains { $0.contains("retired") && $0.contains("generation=2") }
                atDrainEnd.withLock { $0 = (generation.snapshot.phase, destroyed) }
            }
            // The hook holds the registry that holds the hook: cleared, or the registry is never released
            // (LeakSanitizer's indirect leak of this BackendRegistry, make test-asan-ci).
            defer { registry.setBeforeSwitchHook(nil) }
            await #expect(throws: BackendLoadError.self) { try await registry.reload("c-fixture") }
            #expect(harness.status("c-fixture")?.generation == nil)
            #expect(throws: AFMError.self) { _ = try registry.lease(model: "c-echo") }
            let seen = try #require(atDrainEnd.withLock { $0 })
            #expect(seen.phase == .retired)
            #expect(seen.destroyed)
        }
        #expect(await eventually { released == nil }, "the shut-down registry is still referenced")
    }

    /// A reload asked for once shutdown began is refused before it builds anything (a model load would otherwise
    /// run on while the daemon exits).
    @Test func aReloadAfterShutdownBeganIsRefusedWithoutBuilding() async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(hosting: "in-process")
        await harness.registry.loadAll()
        await harness.registry.drainAll(deadline: .milliseconds(100))
        do {
            try await harness.registry.reload("c-fixture")
            Issue.record("a reload after shutdown began succeeded")
        } catch {
            #expect(error.reason == "shutting_down")
        }
        #expect(!harness.sink.capturedLines.contains { $0.contains("generation=2") })
    }

    /// A stream that ended is held by nothing of the host's: the generation, the instance host (the runner's stream
    /// table, the in-process sink table) and the generation table take references while it runs and drop them all
    /// at its end, so afmd keeps nothing per finished request. (LeakSanitizer cannot see this: the generation
    /// table is a global, so a stream left in it is reachable, not leaked.)
    @Test(arguments: Hosting.both) func anEndedStreamIsReleased(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        weak var released: GenerationStream?
        do {
            let lease = try harness.registry.lease(model: "c-echo")
            let stream = try lease.start(requestDocument: requestDocument(model: "c-echo", text: "once"))
            released = stream
            #expect(text(of: await collect(stream)) == "once")
        }
        #expect(await eventually { released == nil }, "something still holds the ended stream")
    }

    // MARK: - Watchdog

    /// Runner hosting returns credit in batches of 64: a consumer that took 63 events and then pauses longer than
    /// the silence limit holds the runner back (its window is spent) and is not the backend's silence.
    @Test(arguments: Hosting.both) func aReaderSlowerThanTheSilenceLimitIsNotCutOff(hosting: String) async throws {
        // 2 s of silence allowed, twice that paused: margin for a runner slowed down by a loaded machine.
        let harness = RegistryHarness(limits: GenerationLimits(silenceLimit: .seconds(2), cancelGrace: .seconds(2)))
        try harness.directory.addCFixture(hosting: hosting)
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-flood")
        let stream = try lease.start(requestDocument: requestDocument(model: "c-flood", text: "1000"))
        var iterator = stream.makeAsyncIterator()
        var received: [BackendEvent] = []
        for _ in 0..<63 { if let event = await iterator.next() { received.append(event) } }
        // The backend filled its window and waits for the consumer.
        #expect(await eventually { stream.pendingCount >= RunnerInstanceHost.creditWindow - 63 })
        try await Task.sleep(for: .seconds(4))
        while let event = await iterator.next() { received.append(event) }
        #expect(text(of: received).count == 1000)
        #expect(received.last == .done(.stop))
    }

    /// A cancel held back until `generate` returned gets its grace period from its delivery: the watchdog neither
    /// expires the stream meanwhile nor calls `cancel` before `generate` returned.
    @Test func theCancelGraceStartsWhenTheCancelIsDelivered() {
        let cancels = Atomic<Int>(0)
        let stream = GenerationStream(
            id: 3, silenceLimit: .seconds(60), cancelGrace: .milliseconds(500),
            onCancel: { cancels.add(1, ordering: .relaxed) }, onTerminal: { _ in })
        stream.cancel()  // during `generate`: held back
        let later = ContinuousClock.now + .seconds(10)
        guard case .healthy = stream.watchdogCheck(now: later) else {
            Issue.record("the watchdog expired a stream whose cancel was not delivered yet")
            return
        }
        #expect(cancels.load(ordering: .relaxed) == 0)
        stream.armCancel()  // `generate` returned: the cancel is delivered now
        #expect(cancels.load(ordering: .relaxed) == 1)
        guard case .healthy = stream.watchdogCheck(now: ContinuousClock.now) else {
            Issue.record("expired right at delivery")
            return
        }
        guard case .expire(.done(.cancelled)) = stream.watchdogCheck(now: ContinuousClock.now + .seconds(1)) else {
            Issue.record("a cancel ignored past its grace period was not cut off")
            return
        }
    }

    /// A drain deadline that cancels a request whose runner `generate` is still running (`c-slow-generate` takes
    /// 6 s to return): the cancel waits for `generate` to return, its grace period starts then, and the runner is
    /// not killed for "ignoring" a cancel it could not have received.
    @Test func aCancelDuringASlowRunnerGenerateIsDeliveredAfterIt() async throws {
        let harness = RegistryHarness(
            limits: GenerationLimits(silenceLimit: .seconds(60), cancelGrace: .milliseconds(1500)), drainTimeout: .milliseconds(50))
        try harness.directory.addCFixture(hosting: "runner")
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-slow-generate")
        let started = Mutex<Result<GenerationStream, AFMError>?>(nil)
        let thread = Thread {  // `generate` blocks its caller: not on the cooperative pool
            let result = Result { () throws(AFMError) in try lease.start(requestDocument: requestDocument(model: "c-slow-generate", text: "6000")) }
            started.withLock { $0 = result }
        }
        thread.start()
        try await harness.registry.reload("c-fixture")  // generation 1 drains; its deadline cancels the request
        #expect(await eventually(timeout: .seconds(30)) { started.withLock { $0 != nil } })
        let stream = try #require(try started.withLock { $0 }?.get())
        #expect(await collect(stream).last == .done(.cancelled))
        #expect(harness.status("c-fixture")?.crashes == 0)
        #expect(!harness.sink.capturedLines.contains { $0.contains("killing the backend runner") })
    }

    /// A cancelled stream nobody reads any more (the client left) whose backend ignores the cancel: a full buffer
    /// must not hide it from the cancel grace period, or its lease is held forever.
    @Test func aFullBufferDoesNotShieldAnIgnoredCancel() {
        let stream = GenerationStream(
            id: 4, capacity: 4, silenceLimit: .seconds(60), cancelGrace: .milliseconds(500), onCancel: {}, onTerminal: { _ in })
        stream.armCancel()
        for _ in 0..<4 { _ = stream.receive(.textDelta("x"), waitForRoom: false) }
        stream.cancel()
        guard case .expire(.done(.cancelled)) = stream.watchdogCheck(now: ContinuousClock.now + .seconds(1)) else {
            Issue.record("a full buffer kept an ignored cancel alive")
            return
        }
    }

    // MARK: - Draining

    /// The drain deadline keeps its fractions of a second: 900 ms is not an immediate cancel.
    @Test func aDrainDeadlineBelowOneSecondIsKept() async throws {
        let harness = RegistryHarness(drainTimeout: .milliseconds(900))
        try harness.directory.addCFixture(hosting: "in-process")
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-slow")
        let stream = try lease.start(requestDocument: requestDocument(model: "c-slow"))
        let consumer = Task { await collect(stream) }
        let reloadStarted = ContinuousClock.now
        try await harness.registry.reload("c-fixture")
        let events = await consumer.value
        #expect(events.last == .done(.cancelled))
        // A lower bound only: a loaded machine makes it later, never earlier.
        #expect(ContinuousClock.now - reloadStarted >= .milliseconds(850))
    }

    /// Shutdown's deadline applies to a generation a reload already put into draining with a longer one: its
    /// requests are cancelled at shutdown's deadline, not left to run past the daemon's exit.
    @Test func shutdownCancelsRequestsOfAGenerationAlreadyDraining() async throws {
        let harness = RegistryHarness(drainTimeout: .seconds(60))
        try harness.directory.addCFixture(hosting: "in-process")
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-slow")
        let generation = lease.generation
        let stream = try lease.start(requestDocument: requestDocument(model: "c-slow"))
        let consumer = Task { await collect(stream) }
        try await harness.registry.reload("c-fixture")  // generation 1 drains, its deadline 60 s away
        #expect(generation.snapshot.phase == .draining)
        await harness.registry.drainAll(deadline: .milliseconds(200))
        #expect(stream.wasCancelled)
        #expect(generation.snapshot.phase == .retired)
        #expect(await consumer.value.last == .done(.cancelled))
    }

    /// A lease taken before the drain whose stream starts after the drain deadline fired (the deadline's list of
    /// streams did not have it) is cancelled as it starts.
    @Test func aStreamStartedAfterTheDrainDeadlineIsCancelled() async throws {
        let harness = RegistryHarness(drainTimeout: .milliseconds(50))
        try harness.directory.addCFixture(hosting: "in-process")
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-slow")
        let generation = lease.generation
        try await harness.registry.reload("c-fixture")
        try await Task.sleep(for: .milliseconds(200))
        #expect(harness.sink.capturedLines.contains { $0.contains("draining") && $0.contains("generation=1") })
        let started = ContinuousClock.now
        let stream = try lease.start(requestDocument: requestDocument(model: "c-slow"))
        let events = await collect(stream)
        #expect(events.last == .done(.cancelled))
        #expect(stream.wasCancelled)
        // c-slow runs 4 s when nobody cancels it.
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(await eventually { generation.snapshot.phase == .retired })
    }

    // MARK: - Usage after a cancel

    /// A backend that ignores `emit`'s answer and keeps sending usage after a cancel: usage still passes without
    /// backpressure, but the buffer keeps only the latest (usage is cumulative) instead of growing until the grace
    /// period ends.
    @Test func usageAfterACancelDoesNotGrowTheBuffer() async {
        let stream = GenerationStream(
            id: 5, capacity: 4, silenceLimit: .seconds(60), cancelGrace: .seconds(5), onCancel: {}, onTerminal: { _ in })
        stream.armCancel()
        for _ in 0..<4 { _ = stream.receive(.textDelta("x"), waitForRoom: false) }
        stream.cancel()
        for count in 1...100_000 {
            #expect(stream.receive(.usage(BackendUsage(inputTokens: 3, outputTokens: count))) == 1)
        }
        #expect(stream.pendingCount <= 5)
        _ = stream.receive(.done(.cancelled))
        let events = await collect(stream)
        #expect(events == [.textDelta("x"), .textDelta("x"), .textDelta("x"), .textDelta("x"),
                           .usage(BackendUsage(inputTokens: 3, outputTokens: 100_000)), .done(.cancelled)])
    }

    /// The runner's side: usage after a cancel passes within the credit window; beyond it only the latest is kept,
    /// and sent just before the terminal event, so the outbox does not grow either.
    @Test func usageAfterACancelDoesNotGrowTheRunnerOutbox() throws {
        let (mine, theirs) = try FileDescriptor.makeSocketPair()
        let channel = RunnerChannel(descriptor: mine)
        defer {
            channel.close()
            theirs.close()
        }
        let outbox = RunnerOutbox(channel: channel)  // no writer thread: what is sent stays queued, to be measured
        let relay = RunnerRelay(id: UInt64.max - 9, window: 4, outbox: outbox)
        RunnerRelayTable.shared.insert(relay)
        relay.cancel()
        var frame: [UInt8] = []
        RunnerFrame.event(requestID: relay.id, .usage(BackendUsage(inputTokens: 3, outputTokens: 100_000))).encode(into: &frame)
        for count in 1...100_000 {
            #expect(relay.emit(.usage(BackendUsage(inputTokens: 3, outputTokens: count))) == 1)
        }
        #expect(outbox.pendingByteCount <= 4 * frame.count)
        let before = outbox.pendingByteCount
        _ = relay.emit(.done(.cancelled))
        // The latest usage, then the terminal event.
        #expect(outbox.pendingByteCount > before + frame.count)
    }

    /// After a cancel, a usage held for lack of credit is older than one sent later with credit: the one sent
    /// last before the terminal event must be the newest (usage counts are cumulative; the last one counts).
    @Test func aHeldUsageNeverFollowsANewerOne() async throws {
        let (mine, theirs) = try FileDescriptor.makeSocketPair()
        let channel = RunnerChannel(descriptor: mine)
        let reader = RunnerChannel(descriptor: theirs)
        let frames = Mutex<[RunnerFrame]>([])
        let readerDone = Mutex(false)
        Thread.detachNewThread {
            _ = reader.readFrames { frame in frames.withLock { $0.append(frame) } }
            readerDone.withLock { $0 = true }
        }
        let outbox = RunnerOutbox(channel: channel)
        try outbox.start()
        let relay = RunnerRelay(id: UInt64.max - 10, window: 1, outbox: outbox)
        RunnerRelayTable.shared.insert(relay)
        _ = relay.emit(.textDelta("a"))  // the only credit
        relay.cancel()
        #expect(relay.emit(.usage(BackendUsage(inputTokens: 3, outputTokens: 5))) == 1)  // held: no credit
        relay.grant(1)
        _ = relay.emit(.usage(BackendUsage(inputTokens: 3, outputTokens: 10)))  // credit again: sent at once
        _ = relay.emit(.done(.cancelled))
        #expect(
            await eventually {
                frames.withLock { $0.contains { if case .event(_, .done) = $0 { true } else { false } } }
            })
        reader.shutdown()
        #expect(await eventually { readerDone.withLock { $0 } })
        let usages = frames.withLock { frames in
            frames.compactMap { frame -> Int? in
                if case .event(_, .usage(let usage)) = frame { usage.outputTokens } else { nil }
            }
        }
        #expect(usages.last == 10, "usage frames in order: \(usages)")
        reader.close()
    }

    /// Replacing a crashed generation does not drain it: it has nothing in flight and is not "draining".
    @Test func aCrashedGenerationIsNotDrained() async throws {
        let harness = RegistryHarness(restartPolicy: RestartPolicy(initialDelay: .seconds(60)))
        try harness.directory.addCFixture(hosting: "runner")
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-exit")
        _ = await collect(try lease.start(requestDocument: requestDocument(model: "c-exit")))
        #expect(await eventually { harness.status("c-fixture")?.state == "restarting" })
        try await harness.registry.reload("c-fixture")
        #expect(harness.status("c-fixture")?.generation == 2)
        #expect(!harness.sink.capturedLines.contains { $0.contains("draining") && $0.contains("generation=1") })
    }
}
