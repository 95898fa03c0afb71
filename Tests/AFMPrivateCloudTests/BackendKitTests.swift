// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import CAFMBackendABI
import Foundation
import Synchronization
import Testing

/// The two Swift backends built with AFMBackendKit (scripted and private-cloud): their libraries export only the
/// ABI's entry point, and both load into one afmd and serve side by side, each with its own copy of the kit.
@Suite(.serialized) struct BackendKitTests {
    /// `nm -D --defined-only --extern-only` of every staged Swift backend lists `afm_backend_negotiate` alone
    /// (the kit's exports.map; before it, a debug build exported every Swift symbol: 640 in scripted.so).
    @Test(arguments: ["scripted", "private-cloud"]) func exportsOnlyTheNegotiationSymbol(backend: String) throws {
        let library = LocalDaemon.stagedBackends + "/\(backend).so"
        #expect(FileManager.default.fileExists(atPath: library), "\(library) is not staged (scripts/stage-backends)")
        let result = try CommandOutput.run("/usr/bin/nm", ["-D", "--defined-only", "--extern-only", library])
        #expect(result.status == 0, "\(result.output)")
        let names = result.output.split(separator: "\n").compactMap { $0.split(separator: " ").last.map(String.init) }
        #expect(names == ["afm_backend_negotiate"], "\(backend).so exports \(names.prefix(20))")
    }

    /// One afmd hosts both kit backends in-process. Requests to each, interleaved from several threads, are answered
    /// by the right one: the scripted echo, and the private cloud forwarding to a second afmd's scripted model.
    @Test func twoKitBackendsServeSideBySideInOneDaemon() throws {
        let upstream = try CloudDaemon(
            cloud: nil, scriptedModels: [scriptedModel("far-model", steps: #"[{"text":"from "},{"text":"far away"}]"#)])
        let gateway = try CloudDaemon(
            cloud: "Upstreams=\(upstream.baseURL)\nProtocol=responses\nModel=far-model\nContextTokens=2048")
        for id in ["scripted", "private-cloud"] {
            let status = try #require(try gateway.status(id), "no /status entry for \(id)")
            #expect(status["state"]?.stringValue == "ready", "\(id): \(status)")
            #expect(status["hosting"]?.stringValue == "in-process", "\(id): \(status)")
        }
        let failures = Mutex<[String]>([])
        let port = gateway.port
        DispatchQueue.concurrentPerform(iterations: 16) { index in
            do {
                let cloud = index % 2 == 0
                let body =
                    cloud
                    ? #"{"model":"private-cloud","input":"hi \#(index)"}"# : #"{"model":"scripted-demo","input":"echo \#(index)"}"#
                let response = try TestHTTPClient(port: port, timeoutSeconds: 120).post("/v1/responses", json: body)
                let expected = cloud ? "from far away" : "echo \(index)"
                let text = response.json?["output"]?.arrayValue?.filter { $0["type"]?.stringValue == "message" }
                    .flatMap { $0["content"]?.arrayValue ?? [] }.compactMap { $0["text"]?.stringValue }.joined()
                if response.status != 200 || text != expected {
                    failures.withLock { $0.append("\(index): \(response.status) \(text ?? response.text)") }
                }
            } catch {
                failures.withLock { $0.append("\(index): \(error)") }
            }
        }
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
        // The upstream's scripted backend saw the cloud's half of them.
        #expect(upstream.records().filter { $0["event"]?.stringValue == "generate" }.count == 8)
    }

    /// A kit backend that emits one generation's events from two threads at once (a bug the ABI forbids) has them
    /// delivered one after the other: the host's emit never runs twice at once, and nothing traps. Before, the kit
    /// checked with a precondition, which trapped inside the host (afmd in-process: the whole daemon).
    @Test func emitsFromTwoThreadsAreSerializedNotATrap() throws {
        let driver = try KitFixtureDriver()
        var outcome = driver.generate(KitFixtureDriver.request(model: "kit-two-threads"))
        #expect(outcome.status == AFM_OK, "\(outcome.message)")
        #expect(outcome.recorder.terminal.wait(timeout: .now() + 30) == .success, "no terminal event")
        let events = outcome.recorder.events.withLock { $0 }
        #expect(outcome.recorder.overlaps.load(ordering: .relaxed) == 0)
        #expect(events.filter { $0.type == AFM_EVENT_TEXT_DELTA }.count == 6, "\(events)")
        #expect(events.last?.type == AFM_EVENT_DONE && events.filter { $0.type == AFM_EVENT_DONE }.count == 1, "\(events)")
        driver.destroy()
        // The sink's reference went with the instance (kept for good, it was a leak LeakSanitizer reported).
        let released = isKnownUniquelyReferenced(&outcome.recorder)
        #expect(released, "the sink still holds the recorder after destroy")
    }

    /// A kit backend that refuses with a code outside the table (0, which says "accepted", or 99) reaches the host
    /// as `internal` (13), naming the code it gave; an ERROR event with code 0 arrives as `internal` too. Before, a
    /// refusal with 0 made generate return AFM_OK: the host waited for a terminal event that never came.
    @Test func errorCodesOutsideTheTableCrossAsInternal() throws {
        let driver = try KitFixtureDriver()
        let zero = driver.generate(KitFixtureDriver.request(model: "no-such-model"))
        #expect(zero.status == AFM_ERR_INTERNAL && zero.errorCode == AFM_ERR_INTERNAL, "\(zero.status) \(zero.errorCode)")
        #expect(zero.message.contains("kit-fixture has no such model") && zero.message.contains("error code 0"), "\(zero.message)")
        let ninetyNine = driver.generate("{not json")
        #expect(ninetyNine.status == AFM_ERR_INTERNAL && ninetyNine.errorCode == AFM_ERR_INTERNAL)
        #expect(ninetyNine.message.contains("error code 99"), "\(ninetyNine.message)")
        var event = driver.generate(KitFixtureDriver.request(model: "kit-error-event"))
        #expect(event.status == AFM_OK)
        #expect(event.recorder.terminal.wait(timeout: .now() + 30) == .success, "no terminal event")
        let events = event.recorder.events.withLock { $0 }
        #expect(events.count == 1 && events.first?.type == AFM_EVENT_ERROR && events.first?.code == AFM_ERR_INTERNAL, "\(events)")
        driver.destroy()
        let released = isKnownUniquelyReferenced(&event.recorder)
        #expect(released, "the sink still holds the recorder after destroy")
    }

    /// afm-backend-check passes the private cloud, configured with a second afmd as its upstream (unconfigured, it
    /// is unavailable and fails the generation checks, naming that).
    @Test func afmBackendCheckPassesThePrivateCloud() throws {
        let upstream = try CloudDaemon(
            cloud: nil, scriptedModels: [scriptedModel("far-model", steps: #"[{"text":"from "},{"text":"far away"}]"#)])
        let library = LocalDaemon.stagedBackends + "/private-cloud.so"
        let result = try CommandOutput.run(
            TestPaths.binDirectory + "/afm-backend-check",
            ["--runner", TestPaths.runner, "--setting", "Upstreams=\(upstream.baseURL)", "--setting", "Protocol=responses",
             "--setting", "Model=far-model", library])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.hasSuffix("\(library): 11 checks, 11 passed, 0 failed\n"), "\(result.output)")
        let unconfigured = try CommandOutput.run(
            TestPaths.binDirectory + "/afm-backend-check", ["--only", "describe,cancel", library])
        #expect(unconfigured.status == 1)
        #expect(unconfigured.output.contains("PASS  describe"), "\(unconfigured.output)")
        #expect(unconfigured.output.contains("the backend is unavailable (private cloud is not configured)"), "\(unconfigured.output)")
    }
}
