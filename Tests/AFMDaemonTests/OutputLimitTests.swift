// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// `[Responses] MaxOutputBytes`: a generation whose accumulated output (text, tool-call arguments, reasoning)
/// goes past the limit is cancelled and fails with `output_limit_exceeded`, so a runaway backend cannot grow
/// afmd's memory without bound.
@Suite struct OutputLimitTests {
    private static let kibibyte = String(repeating: "a", count: 1024)

    private static let models: [String: String] = [
        "big-text": #"[{"repeat":1000,"steps":[{"text":"\#(kibibyte)"}]}]"#,
        "big-call": #"[{"tool_call":{"name":"f","call_id":"call_1","arguments":"{\"x\":\"\#(String(repeating: "b", count: 200_000))\"}","chunks":200}}]"#,
        "big-thought": #"{"capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":true,"reasoning_optional":true},"steps":[{"repeat":1000,"steps":[{"reasoning_text":"\#(kibibyte)"}]},{"text":"done"}]}"#,
        "fits": #"[{"repeat":60,"steps":[{"text":"\#(kibibyte)"}]}]"#,
        // Waits before each delta, so the consumer is always waiting and resumes on the emitting thread.
        "slow-big-text": #"[{"repeat":1000,"steps":[{"delay_ms":1},{"text":"\#(kibibyte)"}]}]"#,
    ]

    private func harness() throws -> DaemonHarness {
        try DaemonHarness(models: Self.models, config: "[Responses]\nMaxOutputBytes=65536\n")
    }

    @Test(arguments: ["big-text", "big-call", "big-thought"])
    func aStreamPastTheLimitFailsWithOutputLimitExceeded(model: String) throws {
        let harness = try harness()
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: model, stream: true))
        #expect(response.status == 200)
        let events = response.events
        let error = try #require(events.first { $0.event == "error" }, "\(response.text.suffix(400))")
        #expect(error.data["code"]?.stringValue == "output_limit_exceeded")
        #expect(error.data["message"]?.stringValue?.contains("MaxOutputBytes") == true)
        let last = try #require(events.last)
        #expect(last.event == "response.failed")
        #expect(last.data["response"]?["error"]?["code"]?.stringValue == "output_limit_exceeded")
        // What was streamed stays within the limit.
        let streamed = events.compactMap { $0.data["delta"]?.stringValue }.map(\.utf8.count).reduce(0, +)
        #expect(streamed <= 65536 && streamed > 0, "\(streamed) bytes of deltas")
        // The generation was cancelled, not left running (the tool call's 200 deltas may all be out before the
        // cancel arrives; the longer answers cannot).
        if model != "big-call" {
            #expect(waitUntil { harness.records().contains { $0["event"] == "cancel" } })
        }
    }

    @Test func aNonStreamingAnswerPastTheLimitIs500WithTheCode() throws {
        let harness = try harness()
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "big-text"))
        #expect(response.status == 500)
        #expect(response.json?["error"]?["code"]?.stringValue == "output_limit_exceeded")
        #expect(response.json?["error"]?["type"]?.stringValue == "server_error")
        // Under the limit nothing changes.
        let fits = try harness.client().post("/v1/responses", json: responsesBody(model: "fits"))
        #expect(fits.status == 200)
        #expect(fits.json?["status"]?.stringValue == "completed")
        #expect(fits.json?["output_text"]?.stringValue?.utf8.count == 60 * 1024 || fits.text.count > 60 * 1024)
    }

    /// A non-streaming answer is collected on the backend's emitting thread (the consumer resumes inline there);
    /// when the limit stops it, the backend's `cancel` is still not called from inside its `emit` (the ABI
    /// forbids that re-entry: a backend that holds a lock across `emit` would deadlock).
    @Test func theCancelOfANonStreamingAnswerIsNotCalledInsideEmit() throws {
        let harness = try harness()
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "slow-big-text"))
        #expect(response.status == 500)
        #expect(response.json?["error"]?["code"]?.stringValue == "output_limit_exceeded")
        #expect(waitUntil { harness.records().contains { $0["event"] == "cancel" } })
        let cancel = try #require(harness.records().first { $0["event"] == "cancel" })
        #expect(cancel["in_emit"]?.boolValue == false, "\(cancel)")
    }

    /// The default limit (8 MiB) applies without configuration: a scripted answer of 1024 × 16 KiB (16 MiB, within
    /// the model's token budget) is cut off.
    @Test func theDefaultLimitCutsOffARunawayGeneration() throws {
        let sixteen = String(repeating: "c", count: 16384)
        let harness = try DaemonHarness(models: ["runaway": #"[{"repeat":2048,"steps":[{"text":"\#(sixteen)"}]}]"#])
        let response = try TestHTTPClient(port: harness.port, timeoutSeconds: 120)
            .post("/v1/responses", json: responsesBody(model: "runaway", stream: true))
        let last = try #require(response.events.last)
        #expect(last.event == "response.failed", "the 32 MiB answer was not cut off (\(response.body.count) bytes)")
        #expect(last.data["response"]?["error"]?["code"]?.stringValue == "output_limit_exceeded")
        let streamed = response.events.compactMap { $0.data["delta"]?.stringValue }.map(\.utf8.count).reduce(0, +)
        #expect(streamed <= 8 << 20, "\(streamed) bytes of deltas")
    }

    private func waitUntil(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if condition() { return true }
            usleep(20_000)
        }
        return condition()
    }
}
