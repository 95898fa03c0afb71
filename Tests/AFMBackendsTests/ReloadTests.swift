// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends
import AFMCore
import AFMTestSupport
import Foundation
import Testing

/// Generations and leases: reload switches new requests, in-flight ones finish where they started.
@Suite struct ReloadTests {
    @Test(arguments: Hosting.both) func reloadWhileStreamingFinishesTheStreamOnItsGeneration(hosting: String) async throws {
        let base = RegistryHarness()
        // 5 s of stream: the reload below must finish while it runs, also on a loaded machine (a 1 s stream once
        // ended before a reload slowed down by a parallel test run).
        let script = try base.writeScript(model: "slow", steps: #"[{"repeat":200,"steps":[{"text":"a"},{"delay_ms":25}]}]"#)
        let record = base.root + "/record.jsonl"
        try base.directory.addScripted(hosting: hosting)
        let harness = RegistryHarness(directory: base.directory, settings: ["scripted": ["Script": script, "RecordFile": record]])
        await harness.registry.loadAll()

        let first = try harness.registry.lease(model: "slow")
        #expect(first.generation.number == 1)
        let stream = try first.start(requestDocument: requestDocument(model: "slow"))
        let consumer = Task { await collect(stream) }

        let number = try await harness.registry.reload("scripted")
        #expect(number == 2)
        let second = try harness.registry.lease(model: "slow")
        #expect(second.generation.number == 2)
        second.release()

        let status = try #require(harness.status("scripted"))
        #expect(status.generation == 2)
        #expect(status.draining.map(\.generation) == [1])

        let events = await consumer.value
        #expect(text(of: events) == String(repeating: "a", count: 200))
        #expect(events.last == .done(.stop))
        // The old generation retires (its instance is destroyed) once its last request ended.
        #expect(await eventually { harness.status("scripted")?.draining.isEmpty == true })
        #expect(await eventually { ((try? String(contentsOfFile: record, encoding: .utf8)) ?? "").contains(#""event":"destroy""#) })
    }

    @Test(arguments: Hosting.both) func aNewLibraryVersionIsLoadedFromANewCopy(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        #expect(harness.status("c-fixture")?.version == "1.0.0")

        try harness.directory.addCFixture(defines: [#"FIXTURE_VERSION="2.0.0""#], hosting: hosting)
        try await harness.registry.reload("c-fixture")
        let status = try #require(harness.status("c-fixture"))
        #expect(status.version == "2.0.0")
        #expect(status.generation == 2)
        if hosting == "in-process" {
            let maps = readProcFile("/proc/self/maps")
            #expect(maps.contains(harness.root + "/copies/c-fixture-g2.so"))
        } else {
            // The runner of generation 2 mapped its own copy (and removed the file once it was loaded).
            let pid = try #require(status.runnerPID)
            #expect(readProcFile("/proc/\(pid)/maps").contains(harness.root + "/copies/c-fixture-g2.so"))
        }
        let lease = try harness.registry.lease(model: "c-echo")
        #expect(text(of: await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "v2")))) == "v2")
    }

    /// `reloadChanged` (SIGHUP, `afmctl reload` without a backend): a library rewritten with the same bytes is no
    /// change; different bytes are.
    @Test(arguments: Hosting.both) func onlyALibraryWithDifferentBytesCountsAsChanged(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        func outcome() async -> BackendRegistry.ReloadOutcome? {
            await harness.registry.reloadChanged().first { $0.backend == "c-fixture" }?.outcome
        }
        guard case .unchanged(generation: 1) = await outcome() else { Issue.record("an untouched library reloaded"); return }

        let library = harness.directory.path + "/c-fixture.so"
        let bytes = try Data(contentsOf: URL(fileURLWithPath: library))
        try FileManager.default.removeItem(atPath: library)
        try bytes.write(to: URL(fileURLWithPath: library))  // a new file (inode, time), the same bytes
        guard case .unchanged(generation: 1) = await outcome() else { Issue.record("the same bytes reloaded"); return }

        try harness.directory.addCFixture(defines: [#"FIXTURE_VERSION="2.0.0""#], hosting: hosting)
        guard case .reloaded(generation: 2) = await outcome() else { Issue.record("a new build was not reloaded"); return }
        #expect(harness.status("c-fixture")?.version == "2.0.0")
    }

    @Test(arguments: Hosting.both) func aFailedReloadKeepsTheActiveGeneration(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)

        try harness.directory.addCFixture(defines: ["FIXTURE_NO_ENTRY"], hosting: hosting)
        await #expect(throws: BackendLoadError.self) { try await harness.registry.reload("c-fixture") }
        let status = try #require(harness.status("c-fixture"))
        #expect(status.state == "ready")
        #expect(status.generation == 1)
        #expect(status.reasonCode == "missing_entry")
        #expect(status.reason?.contains("last reload failed") == true)
        let lease = try harness.registry.lease(model: "c-echo")
        #expect(text(of: await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "old one")))) == "old one")
    }

    @Test(arguments: Hosting.both) func theDrainDeadlineCancelsWhatIsLeft(hosting: String) async throws {
        let harness = RegistryHarness(drainTimeout: .milliseconds(300))
        try harness.directory.addCFixture(hosting: hosting)
        await harness.registry.loadAll()
        let lease = try harness.registry.lease(model: "c-slow")
        let stream = try lease.start(requestDocument: requestDocument(model: "c-slow"))
        let consumer = Task { await collect(stream) }
        try await harness.registry.reload("c-fixture")
        let events = await consumer.value
        #expect(events.last == .done(.cancelled))
        #expect(await eventually { harness.status("c-fixture")?.draining.isEmpty == true })
    }

    @Test(arguments: Hosting.both) func unknownModelsAreNotFound(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        do {
            _ = try harness.registry.lease(model: "nope")
            Issue.record("lease of an unknown model succeeded")
        } catch {
            #expect(error.httpStatus == 404)
            #expect(error.publicCode == "model_not_found")
        }
    }
}
