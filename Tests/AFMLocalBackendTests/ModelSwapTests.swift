// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Swapping the local model on a running afmd (issue 5, DESIGN §5): SmolLM2-135M → Gemma 3 270M through a config
/// drop-in and a reload, while a stream is in flight. No rebuild, no restart: the same process, the same `local.so`.
///
/// `make test` fetches both models (`scripts/fetch-model`, `scripts/fetch-model gemma3-270m`); a missing model
/// fails the test with the reason, it is never skipped.
@Suite struct ModelSwapTests {
    static let smolID = "smollm2-135m-instruct"
    static let gemmaID = "gemma-3-270m"

    static var gemmaModel: String {
        ProcessInfo.processInfo.environment["AFM_GEMMA_MODEL"] ?? TestPaths.root + "/.cache/afm/models/gemma-3-270m-q4_k_m.gguf"
    }

    static func isFinal(_ event: String) -> Bool {
        ["response.completed", "response.incomplete", "response.failed"].contains(event)
    }

    func modelIDs(_ local: LocalDaemon) throws -> [String] {
        try local.client().get("/v1/models").json?["data"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test func aDropInAndAReloadSwapTheModelWhileAStreamIsInFlight() throws {
        let gemma = Self.gemmaModel
        guard FileManager.default.fileExists(atPath: gemma) else {
            throw LocalDaemon.Failure(description: "\(gemma) is missing: run `scripts/fetch-model gemma3-270m` (or `make model-gemma`)")
        }
        // On a busy 2-core machine the old stream can take minutes; the default drain deadline (120 s) and the
        // processing deadline (300 s) would cut it off, and those deadlines are not what this test is about.
        let local = try LocalDaemon(settings: "\n[Server]\nProcessingDeadlineSeconds=1800\n[Backends]\nDrainTimeoutSeconds=900\n")
        let pid = local.daemon.process.processIdentifier
        let before = try modelIDs(local)
        #expect(before.contains(Self.smolID), "\(before)")
        #expect(!before.contains(Self.gemmaID), "\(before)")
        #expect(try local.status()?["generation"] == 1)

        // A long greedy answer on SmolLM2 (capped at the 512-token output budget); a few deltas arrive first.
        let streaming = try local.client()
        try streaming.sendRequest(
            "POST", "/v1/responses",
            body: Array(#"{"model":"on-device","input":"Write a very long story about a dragon who learns to count.","stream":true,"max_output_tokens":500,"temperature":0}"#.utf8))
        func deltaCount(_ text: String) -> Int { text.components(separatedBy: "event: response.output_text.delta").count - 1 }
        _ = try streaming.readUntil { deltaCount($0) >= 1 }
        let firstDelta = Date()
        let early = try streaming.readUntil { deltaCount($0) >= 21 }
        let rateBefore = Double(deltaCount(early) - 1) / Date().timeIntervalSince(firstDelta)
        #expect(!TestHTTPClient.parseEvents(early).contains { Self.isFinal($0.event) }, "the stream ended before the reload")

        // The drop-in overrides the main file's Model; the reload builds generation 2 of `local` and switches.
        let dropIns = local.daemon.root + "/etc/afm/afmd.conf.d"
        try FileManager.default.createDirectory(atPath: dropIns, withIntermediateDirectories: true)
        try "[Backend.local]\nModel=\(gemma)\n".write(toFile: dropIns + "/50-model.conf", atomically: true, encoding: .utf8)
        let started = Date()
        let reload = try local.daemon.afmctl(["--json", "reload", "--wait"])
        let reloadSeconds = Date().timeIntervalSince(started)
        #expect(reload.status == 0, "afmctl reload: \(reload.output) \(reload.errors)\n\(local.daemon.log.suffix(2000))")
        let reply = try JSONParser.parse(reload.output)
        let reloaded = reply["backends"]?.arrayValue?.first { $0["backend"] == "local" }
        #expect(reloaded?["outcome"] == "reloaded", "\(reply)")
        #expect(reloaded?["generation"] == 2, "\(reply)")

        // Right after the switch: generation 2 serves Gemma.
        let switched = try #require(try local.status())
        #expect(switched["generation"] == 2, "\(switched)")
        #expect(switched["state"] == "ready", "\(switched)")
        #expect(switched["models"] == [.string(Self.gemmaID)], "\(switched)")
        // The stream (500 tokens) outlasts the reload (about 3 s here): generation 1 is still draining it.
        let drainingAtSwitch = switched["draining"]?.arrayValue ?? []
        #expect(drainingAtSwitch.contains { $0["generation"] == 1 && $0["inflight"] == 1 }, "the stream was not in flight at the switch: \(switched)")
        let after = try modelIDs(local)
        #expect(after.contains(Self.gemmaID), "\(after)")
        #expect(!after.contains(Self.smolID), "\(after)")

        // The in-flight stream completes, from the old model.
        let rest = try streaming.readUntil { text in TestHTTPClient.parseEvents(text).contains { Self.isFinal($0.event) } }
        let rateAfter = Double(deltaCount(rest) - deltaCount(early)) / Date().timeIntervalSince(started)
        let events = TestHTTPClient.parseEvents(rest)
        let final = try #require(events.last { Self.isFinal($0.event) })
        #expect(["response.completed", "response.incomplete"].contains(final.event), "\(final.event): \(final.data)")
        #expect(final.data["response"]?["model"] == .string(Self.smolID))
        let oldDeltas = events.filter { $0.event == "response.output_text.delta" }.count
        #expect(oldDeltas > 4)
        #expect(!rest.contains("response.failed"))

        // The next request is answered by Gemma, with text.
        let next = try local.client().post(
            "/v1/responses",
            json: #"{"model":"\#(Self.gemmaID)","input":"What is the capital of France? Answer in one sentence.","stream":true,"max_output_tokens":48,"temperature":0}"#)
        #expect(next.status == 200, "\(next)")
        let nextEvents = next.events
        let nextFinal = try #require(nextEvents.last)
        #expect(["response.completed", "response.incomplete"].contains(nextFinal.event), "\(nextFinal.event): \(nextFinal.data)")
        #expect(nextFinal.data["response"]?["model"] == .string(Self.gemmaID))
        let text = nextEvents.filter { $0.event == "response.output_text.delta" }.compactMap { $0.data["delta"]?.stringValue }.joined()
        #expect(!text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "Gemma produced no text: \(next.text.prefix(600))")
        // The alias follows the swap too.
        let alias = try local.client().post("/v1/responses", json: #"{"model":"on-device","input":"Hi","max_output_tokens":4}"#)
        #expect(alias.json?["model"] == .string(Self.gemmaID), "\(alias)")
        // The old id is gone once generation 1 has drained.
        var drained = false
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            if (try? local.status()?["draining"]) == [] { drained = true; break }
            usleep(50_000)
        }
        #expect(drained)
        #expect(try local.client().post("/v1/responses", json: #"{"model":"\#(Self.smolID)","input":"Hi"}"#).status == 404)

        // /status: generation 2 for local; no restart (same pid, still running, one start in the log).
        let final2 = try #require(try local.status())
        #expect(final2["generation"] == 2)
        #expect(final2["models"] == [.string(Self.gemmaID)])
        #expect(local.daemon.process.isRunning)
        #expect(local.daemon.process.processIdentifier == pid)
        #expect(try local.client().get("/status").json?["pid"] == .number(JSONNumber(Int(pid))))
        #expect(local.daemon.log.components(separatedBy: "listening on").count == 2)
        print(
            "model swap: reload took \(String(format: "%.2f", reloadSeconds)) s; draining at switch: \(drainingAtSwitch); old stream \(oldDeltas) deltas (\(final.event)), \(String(format: "%.1f", rateBefore)) deltas/s before the reload, \(String(format: "%.1f", rateAfter)) after; Gemma said: \(text.prefix(120).debugDescription)"
        )
    }
}
