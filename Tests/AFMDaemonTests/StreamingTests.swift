// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Server-Sent Events end to end: the lifecycle, terminal cases, disconnects, concurrency and shutdown.
@Suite struct StreamingTests {
    /// Replaces the random ids and clock values of a transcript so it can be compared with a golden file.
    static func normalize(_ text: String) -> String {
        var result = text
        for prefix in ["resp", "msg", "fc", "call", "chatcmpl"] {
            let separator = prefix == "chatcmpl" ? "-" : "_"
            let pattern = try! NSRegularExpression(pattern: "\"\(prefix)\(separator)[0-9a-f]{24}\"")  // A literal, valid pattern.
            var counter = 0
            var mapping: [String: String] = [:]
            for match in pattern.matches(in: result, range: NSRange(result.startIndex..., in: result)) {
                let id = String(result[Range(match.range, in: result)!])  // The range comes from this string.
                if mapping[id] == nil {
                    counter += 1
                    mapping[id] = "\"\(prefix)\(separator)\(counter)\""
                }
            }
            for (id, replacement) in mapping { result = result.replacingOccurrences(of: id, with: replacement) }
        }
        let clock = try! NSRegularExpression(pattern: "\"(created_at|completed_at|created)\":[0-9]+")  // A literal, valid pattern.
        return clock.stringByReplacingMatches(in: result, range: NSRange(result.startIndex..., in: result), withTemplate: "\"$1\":0")
    }

    static func golden(_ name: String) throws -> String {
        try String(contentsOfFile: TestPaths.root + "/Tests/Fixtures/golden/\(name)", encoding: .utf8)
    }

    @Test(arguments: [
        ("text.sse", #"[{"text":"Hel"},{"text":"lo!"},{"usage":{"input_tokens":9,"output_tokens":2,"reasoning_tokens":0,"cached_tokens":0}}]"#, ""),
        ("incomplete.sse", #"[{"text":"a"},{"text":"b"},{"text":"c"}]"#, #","max_output_tokens":2"#),
        ("failed.sse", #"[{"text":"partial"},{"error":{"code":"internal","message":"backend exploded"}}]"#, ""),
        ("function-call.sse", #"[{"tool_call":{"name":"get_weather","call_id":"call_abc","arguments":"{\"city\":\"SF\"}","chunks":2}},{"usage":{"input_tokens":5,"output_tokens":7,"reasoning_tokens":0,"cached_tokens":0}}]"#, ""),
    ])
    func goldenTranscript(_ testCase: (golden: String, steps: String, extra: String)) throws {
        let harness = try DaemonHarness(models: ["demo": testCase.steps])
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "demo", stream: true, extra: testCase.extra))
        #expect(response.status == 200)
        #expect(response.header("Content-Type")?.hasPrefix("text/event-stream") == true)
        #expect(!response.text.contains("[DONE]"))
        let transcript = Self.normalize(response.text)
        if ProcessInfo.processInfo.environment["AFM_UPDATE_GOLDEN"] == "1" {
            // Regenerate with AFM_UPDATE_GOLDEN=1 make test, then review the diff like code.
            try transcript.write(toFile: TestPaths.root + "/Tests/Fixtures/golden/\(testCase.golden)", atomically: true, encoding: .utf8)
        }
        let expected = try Self.golden(testCase.golden)
        #expect(transcript == expected, "transcript:\n\(transcript)")
        // Invariants that hold for every stream, golden file or not.
        let events = response.events
        #expect(events.first?.event == "response.created")
        #expect(events.map { $0.data["sequence_number"]?.numberValue?.intValue ?? -1 } == Array(0..<events.count))
        #expect(events.allSatisfy { $0.event == $0.data["type"]?.stringValue })
        #expect(events.allSatisfy { $0.data["error"] == nil })
        let terminal = events.filter { ["response.completed", "response.incomplete", "response.failed"].contains($0.event) }
        #expect(terminal.count == 1 && terminal.first?.event == events.last?.event)
        let usage = try #require(events.last?.data["response"]?["usage"])
        for key in ["input_tokens", "output_tokens", "total_tokens"] { #expect(usage[key]?.numberValue != nil) }
        #expect(usage["input_tokens_details"]?["cached_tokens"]?.numberValue != nil)
        #expect(usage["output_tokens_details"]?["reasoning_tokens"]?.numberValue != nil)
    }

    @Test func clientDisconnectCancelsTheGenerationWithin100Milliseconds() throws {
        let harness = try DaemonHarness(models: ["forever": #"[{"text":"start"},{"hang":true}]"#])
        for _ in 0..<3 {
            let client = try harness.client()
            try client.sendRequest("POST", "/v1/responses", body: Array(responsesBody(model: "forever", stream: true).utf8))
            _ = try client.readUntil { $0.contains("response.output_text.delta") }
            let before = harness.records().filter { $0["event"] == "cancel" || $0["event"] == "client_gone" }.count
            let closedAt = nowUnixNanoseconds()
            client.close()
            var cancelAt: Int64?
            _ = waitUntil(seconds: 5) {
                let records = harness.records().filter { $0["event"] == "cancel" || $0["event"] == "client_gone" }
                guard records.count > before else { return false }
                cancelAt = records[before]["time_unix_ns"]?.numberValue?.int64Value
                return true
            }
            let at = try #require(cancelAt, "no cancel was recorded")
            let latency = Double(at - closedAt) / 1_000_000
            #expect(latency < 100, "cancel reached the backend \(latency) ms after the disconnect")
        }
        // The daemon is fine afterwards.
        #expect(try harness.client().get("/health").status == 200)
    }

    @Test func hundredConcurrentStreams() async throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"repeat":20,"steps":[{"text":"t"},{"delay_ms":5}]}]"#])
        let port = harness.port
        let results = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<100 {
                group.addTask {
                    await Task.detachedBlocking {
                        guard let client = try? TestHTTPClient(port: port),
                            let response = try? client.post("/v1/responses", json: responsesBody(model: "demo", stream: true))
                        else { return false }
                        let events = response.events
                        return response.status == 200 && events.last?.event == "response.completed"
                            && events.last?.data["response"]?["output"]?[0]?["content"]?[0]?["text"] == .string(String(repeating: "t", count: 20))
                    }
                }
            }
            var all: [Bool] = []
            for await result in group { all.append(result) }
            return all
        }
        #expect(results.count == 100)
        #expect(results.allSatisfy { $0 })
        let status = try harness.client().get("/status").json
        #expect(status?["backends"]?[0]?["completed"] == 100)
    }

    /// A stream still running at `ProcessingDeadlineSeconds` ends with its dialect's failure event (code `timeout`)
    /// and a complete chunked body, in every dialect. Before, afmd closed the connection mid-stream: no final event,
    /// no last chunk (the client's reader failed on the cut body).
    @Test func aStreamCutByTheProcessingDeadlineEndsWithTheDialectsFailureEvent() throws {
        let harness = try DaemonHarness(
            models: ["slow": #"[{"text":"a"},{"repeat":200,"steps":[{"delay_ms":50},{"text":"b"}]}]"#],
            config: "[Server]\nProcessingDeadlineSeconds=1\n")
        let started = Date()
        let responses = try harness.client().post("/v1/responses", json: responsesBody(model: "slow", stream: true))
        #expect(responses.status == 200)
        let events = responses.events
        #expect(events.contains { $0.event == "response.output_text.delta" })
        let error = try #require(events.first { $0.event == "error" }, "\(responses.text.suffix(400))")
        #expect(error.data["code"] == "timeout")
        #expect(events.last?.event == "response.failed")
        #expect(events.last?.data["response"]?["error"]?["code"] == "timeout")
        // Cut at the deadline (1 s), not played to its end (10 s).
        #expect(Date().timeIntervalSince(started) < 6)

        let chat = try harness.client().post(
            "/v1/chat/completions", json: #"{"model":"slow","messages":[{"role":"user","content":"x"}],"stream":true}"#)
        #expect(chat.status == 200)
        let chunks = ChatCompletionsTests.chunks(chat.text)
        #expect(chunks.last == "[DONE]", "\(chat.text.suffix(400))")
        #expect(chunks.dropLast().last?["error"]?["code"] == "timeout")
        #expect(chunks.contains { $0["choices"]?[0]?["delta"]?["content"] == "a" })

        let messages = try harness.client().post(
            "/v1/messages", json: #"{"model":"slow","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"x"}]}"#)
        #expect(messages.status == 200)
        let anthropic = TestHTTPClient.parseEvents(messages.text)
        #expect(anthropic.last?.event == "error", "\(messages.text.suffix(400))")
        #expect(anthropic.last?.data["error"]?["type"] == "timeout_error")
        #expect(!anthropic.contains { $0.event == "message_stop" })
        // Each generation was cancelled at the backend, and afmd serves on.
        #expect(waitUntil(seconds: 5) { harness.records().filter { $0["event"] == "cancel" }.count == 3 })
        #expect(try harness.client().get("/health").status == 200)
    }

    /// The grace a stream gets after the processing deadline (to end with its failure event) is the backends' cancel
    /// grace plus a second, and follows a reload that changes `CancelGraceSeconds`. The backend here never ends its
    /// generation (its thread ends after one delta without a terminal event), so after the deadline's cancel the
    /// watchdog ends it after the cancel grace: 4 s after the reload. Before, the HTTP grace stayed the one of
    /// start-up (1 s + 1 s) and cut the connection first: no failure event, no last chunk.
    @Test func theDeadlinesGraceFollowsAReloadedCancelGrace() throws {
        let harness = try DaemonHarness(
            models: ["deaf": #"[{"text":"a"},{"no_terminal":true}]"#],
            config: "[Server]\nProcessingDeadlineSeconds=1\n[Backends]\nCancelGraceSeconds=1\n")
        let path = harness.daemon.root + "/afmd.conf"
        let config = try String(contentsOfFile: path, encoding: .utf8)
        #expect(config.contains("CancelGraceSeconds=1\n"))
        try config.replacingOccurrences(of: "CancelGraceSeconds=1\n", with: "CancelGraceSeconds=4\n").write(
            toFile: path, atomically: true, encoding: .utf8)
        let reload = try harness.daemon.afmctl(["reload"])
        #expect(reload.status == 0, "\(reload)")
        let responses = try harness.client().post("/v1/responses", json: responsesBody(model: "deaf", stream: true))
        #expect(responses.status == 200)
        let events = responses.events
        #expect(events.contains { $0.event == "response.output_text.delta" })
        #expect(events.first { $0.event == "error" }?.data["code"] == "timeout", "\(responses.text.suffix(400))")
        #expect(events.last?.event == "response.failed", "\(events.map(\.event))")
    }

    /// A reload that shortens `CancelGraceSeconds` while a stream runs: the stream's deadline grace and its
    /// watchdog's cancel grace stay consistent, so the backend that ignores the cancel is still ended by the watchdog
    /// (4 s → 1 s) before the connection's grace (1 s + 1 s) runs out, and the client gets its failure event.
    /// Failed before (review s9 #3): the HTTP grace followed the reload (2 s) while the stream's watchdog kept the
    /// cancel grace of its lease (4 s), and the connection was cut with no `response.failed`.
    @Test func aStreamKeepsItsFailureEventWhenAReloadShortensTheCancelGrace() throws {
        let harness = try DaemonHarness(
            models: ["deaf": #"[{"text":"a"},{"no_terminal":true}]"#],
            config: "[Server]\nProcessingDeadlineSeconds=3\n[Backends]\nCancelGraceSeconds=4\n")
        let client = try harness.client()
        try client.sendRequest("POST", "/v1/responses", body: Array(responsesBody(model: "deaf", stream: true).utf8))
        _ = try client.readUntil { $0.contains("response.output_text.delta") }
        let path = harness.daemon.root + "/afmd.conf"
        let config = try String(contentsOfFile: path, encoding: .utf8)
        #expect(config.contains("CancelGraceSeconds=4\n"))
        try config.replacingOccurrences(of: "CancelGraceSeconds=4\n", with: "CancelGraceSeconds=1\n").write(
            toFile: path, atomically: true, encoding: .utf8)
        let reload = try harness.daemon.afmctl(["reload"])
        #expect(reload.status == 0, "\(reload)")
        let rest = (try? client.readUntil { $0.contains("response.failed") || $0.contains("response.completed") }) ?? ""
        #expect(rest.contains("\"code\":\"timeout\""), "\(rest.suffix(400))")
        #expect(rest.contains("response.failed"), "\(rest.suffix(400))")
    }

    @Test func sigtermDrainsInFlightStreamsThenExits() throws {
        let harness = try DaemonHarness(models: ["slow": #"[{"repeat":10,"steps":[{"text":"s"},{"delay_ms":50}]}]"#])
        let client = try harness.client()
        try client.sendRequest("POST", "/v1/responses", body: Array(responsesBody(model: "slow", stream: true).utf8))
        _ = try client.readUntil { $0.contains("response.output_text.delta") }
        kill(harness.daemon.process.processIdentifier, SIGTERM)
        // New connections are refused once the listener is closed…
        #expect(waitUntil(seconds: 5) { (try? TestHTTPClient(port: harness.port, timeoutSeconds: 1)) == nil })
        // …while the stream in flight completes.
        let rest = try client.readUntil { $0.contains("response.completed") || $0.contains("response.failed") }
        #expect(rest.contains("response.completed"))
        harness.daemon.process.waitUntilExit()
        #expect(harness.daemon.process.terminationStatus == 0)
        #expect(harness.daemon.log.contains("stopped"))
    }
}

extension Task where Success == Never, Failure == Never {
    /// Runs blocking test I/O on a Dispatch thread instead of the cooperative pool.
    static func detachedBlocking<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: body()) }
        }
    }
}
