// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMTestSupport
import Foundation
import Testing

/// ABI negotiation against real `.so` files: the plain-C fixture in its variants, and the Swift scripted backend.
@Suite struct NegotiationTests {
    @Test(arguments: Hosting.both) func loadsThePlainCBackend(hosting: String) async throws {
        let harness = try await RegistryHarness.loadingTheCFixture(hosting: hosting)
        let status = try #require(harness.status("c-fixture"))
        #expect(status.state == "ready")
        #expect(status.generation == 1)
        #expect(status.models.map(\.id).contains("c-echo"))
        let lease = try harness.registry.lease(model: "c-echo")
        let events = await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "one two three")))
        #expect(text(of: events) == "one two three")
        #expect(events.last == .done(.stop))
    }

    @Test(arguments: Hosting.both) func loadsTheSwiftScriptedBackend(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addScripted(hosting: hosting)
        await harness.registry.loadAll()
        let status = try #require(harness.status("scripted"))
        #expect(status.state == "ready")
        #expect(status.hosting == hosting)
        let lease = try harness.registry.lease(model: "scripted-demo")
        let events = await collect(try lease.start(requestDocument: requestDocument(model: "scripted-demo", text: "echo me")))
        #expect(text(of: events) == "echo me")
    }

    @Test(arguments: Hosting.both) func refusesAManifestForAnotherMajorWithoutLoadingIt(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(manifestABIMajor: 2, hosting: hosting)
        await harness.registry.loadAll()
        let status = try #require(harness.status("c-fixture"))
        #expect(status.state == "failed")
        #expect(status.reasonCode == "abi_mismatch")
        let reason = try #require(status.reason)
        #expect(reason.contains("c-fixture.json"))
        #expect(reason.contains("ABI 2.x") && reason.contains("ABI 1.1"))
        #expect(throws: AFMError.self) { try harness.registry.lease(model: "c-echo") }
    }

    @Test(arguments: Hosting.both) func refusesALibraryThatNegotiatesAnotherMajor(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(defines: ["FIXTURE_ABI_MAJOR=2"], hosting: hosting)
        await harness.registry.loadAll()
        let status = try #require(harness.status("c-fixture"))
        #expect(status.state == "failed")
        #expect(status.reasonCode == "abi_mismatch")
        let reason = try #require(status.reason)
        #expect(reason.contains("c-fixture.so"))
        #expect(reason.contains("ABI 2.1") && reason.contains("ABI 1.1"))
    }

    @Test(arguments: Hosting.both) func refusesALibraryWithoutTheEntrySymbol(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(defines: ["FIXTURE_NO_ENTRY"], hosting: hosting)
        await harness.registry.loadAll()
        let status = try #require(harness.status("c-fixture"))
        #expect(status.reasonCode == "missing_entry")
        #expect(status.reason?.contains("afm_backend_negotiate") == true)
        #expect(status.reason?.contains("c-fixture.so") == true)
    }

    @Test(arguments: Hosting.both) func refusesATooShortFunctionTable(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(defines: ["FIXTURE_SHORT_VTABLE"], hosting: hosting)
        await harness.registry.loadAll()
        let status = try #require(harness.status("c-fixture"))
        #expect(status.reasonCode == "struct_too_short")
        #expect(status.reason?.contains("shorter than ABI 1.0") == true)
    }

    @Test(arguments: Hosting.both) func reportsACreateFailure(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(defines: ["FIXTURE_CREATE_FAILS"], hosting: hosting)
        await harness.registry.loadAll()
        let status = try #require(harness.status("c-fixture"))
        #expect(status.state == "failed")
        #expect(status.reasonCode == "create_failed")
        #expect(status.reason?.contains("fixture model file missing") == true)
    }

    @Test(arguments: Hosting.both) func oneBrokenBackendDoesNotStopTheOthers(hosting: String) async throws {
        let harness = RegistryHarness()
        try harness.directory.addCFixture(id: "broken", defines: ["FIXTURE_NO_ENTRY"], hosting: hosting)
        try harness.directory.addScripted(hosting: hosting)
        await harness.registry.loadAll()
        #expect(harness.status("broken")?.state == "failed")
        #expect(harness.status("scripted")?.state == "ready")
    }

    @Test func loadsFromAGenerationUniqueCopy() async throws {
        let harness = RegistryHarness()
        let original = try harness.directory.addCFixture()
        await harness.registry.loadAll()
        #expect(harness.status("c-fixture")?.state == "ready", "\(String(describing: harness.status("c-fixture")?.reason))")
        let maps = readProcFile("/proc/self/maps")
        #expect(maps.contains(harness.root + "/copies/c-fixture-g1.so"))
        #expect(!maps.contains(original + "\n"))
    }
}
