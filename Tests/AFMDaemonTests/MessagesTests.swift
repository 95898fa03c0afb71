// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// `POST /v1/messages` and `/v1/messages/count_tokens` against the real daemon and the scripted backend, as
/// `reference/dialects.md` §4 describes them.
@Suite struct MessagesTests {
    static let headers = ["anthropic-version": "2023-06-01", "x-api-key": "placeholder", "anthropic-beta": "some-future-beta-2099-01-01"]

    @Test func aTextAnswerIsAMessage() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"Hello"},{"text":", world"}]"#])
        let body = #"{"model":"demo","max_tokens":64,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=1; cch=abc12;"},{"type":"text","text":"Be brief."}],"messages":[{"role":"user","content":"hi"}]}"#
        let response = try harness.client().post("/v1/messages?beta=true", json: body, headers: Self.headers)
        #expect(response.status == 200)
        let message = try #require(response.json)
        #expect(message["id"]?.stringValue?.hasPrefix("msg_") == true)
        #expect(message["type"] == "message")
        #expect(message["role"] == "assistant")
        #expect(message["content"] == [["type": "text", "text": "Hello, world"]])
        #expect(message["stop_reason"] == "end_turn")
        #expect(message["stop_sequence"] == .null)
        #expect(message["usage"]?["output_tokens"] == 2)
        let request = try #require(harness.records().first { $0["event"] == "generate" }?["request"])
        // The billing line that changes every request is gone, so the system text is a stable prefix.
        #expect(request["system"] == ["Be brief."])
        #expect(request["max_output_tokens"] == 64)
    }

    @Test func aStreamFollowsTheEventSequence() throws {
        let script = #"[{"text":"Checking."},{"tool_call":{"name":"get_weather","call_id":"toolu_1","arguments":"{\"city\":\"Paris\"}","chunks":2}},{"finish":"tool_calls"}]"#
        let harness = try DaemonHarness(models: ["demo": script])
        let body = #"{"model":"demo","max_tokens":64,"stream":true,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"messages":[{"role":"user","content":"weather?"}]}"#
        let response = try harness.client().post("/v1/messages", json: body, headers: Self.headers)
        #expect(response.status == 200)
        let events = TestHTTPClient.parseEvents(response.text)
        #expect(
            events.map(\.event) == [
                "message_start", "ping", "content_block_start", "content_block_delta", "content_block_stop", "content_block_start",
                "content_block_delta", "content_block_delta", "content_block_stop", "message_delta", "message_stop",
            ])
        #expect(events.allSatisfy { $0.data["type"]?.stringValue == $0.event })
        #expect(events[0].data["message"]?["content"] == [])
        #expect(events[0].data["message"]?["stop_reason"] == .null)
        #expect(events[2].data["index"] == 0)
        #expect(events[2].data["content_block"] == ["type": "text", "text": ""])
        #expect(events[5].data["index"] == 1)
        #expect(events[5].data["content_block"] == ["type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": [:]])
        let json = events.compactMap { $0.data["delta"]?["partial_json"]?.stringValue }.joined()
        #expect(json == #"{"city":"Paris"}"#)
        #expect(events[9].data["delta"]?["stop_reason"] == "tool_use")
        #expect(events[9].data["usage"]?["output_tokens"] != nil)
    }

    @Test func stopSequencesAndCapsReportTheirReason() throws {
        let harness = try DaemonHarness(models: ["stops": #"[{"text":"alpha beta"},{"text":" gamma"}]"#, "capped": #"[{"text":"a"},{"finish":"length"}]"#])
        let stopped = try harness.client().post(
            "/v1/messages", json: #"{"model":"stops","max_tokens":9,"stop_sequences":["gam"],"messages":[{"role":"user","content":"x"}]}"#)
        #expect(stopped.json?["content"]?[0]?["text"] == "alpha beta ")
        #expect(stopped.json?["stop_reason"] == "stop_sequence")
        #expect(stopped.json?["stop_sequence"] == "gam")
        let capped = try harness.client().post("/v1/messages", json: #"{"model":"capped","max_tokens":1,"messages":[{"role":"user","content":"x"}]}"#)
        #expect(capped.json?["stop_reason"] == "max_tokens")
    }

    @Test func errorsUseAnthropicsEnvelope() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"partial"},{"error":{"code":"busy","message":"full"}}]"#])
        let missing = try harness.client().post("/v1/messages", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}]}"#)
        #expect(missing.status == 400)
        #expect(missing.json?["type"] == "error")
        #expect(missing.json?["error"]?["type"] == "invalid_request_error")
        #expect(missing.json?["error"]?["message"]?.stringValue?.contains("max_tokens") == true)
        let unknown = try harness.client().post("/v1/messages", json: #"{"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"x"}]}"#)
        #expect(unknown.status == 404)
        #expect(unknown.json?["error"]?["type"] == "not_found_error")
        let busy = try harness.client().post("/v1/messages", json: #"{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":"x"}]}"#)
        #expect(busy.status == 503)
        #expect(busy.json?["error"]?["type"] == "overloaded_error")
        let streamed = try harness.client().post("/v1/messages", json: #"{"model":"demo","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}"#)
        let events = TestHTTPClient.parseEvents(streamed.text)
        #expect(events.last?.event == "error")
        #expect(events.last?.data["error"]?["type"] == "overloaded_error")
        #expect(!events.contains { $0.event == "message_stop" })
    }

    /// count_tokens passes the same admission control as generation: with MaxConcurrent=1, MaxQueued=0 and a
    /// generation holding the slot it is refused with 503 and Retry-After in Anthropic's envelope (it was counted
    /// at once, and on a runner-hosted backend every such call tokenized up to the body limit on a new thread).
    @Test func countTokensWaitsForAdmissionLikeAGeneration() throws {
        let harness = try DaemonHarness(
            models: ["slow": #"[{"text":"a"},{"delay_ms":3000},{"text":"b"}]"#], config: "[Backend.scripted]\nMaxConcurrent=1\nMaxQueued=0\n")
        let holder = try harness.client()
        try holder.sendRequest(
            "POST", "/v1/messages", body: Array(#"{"model":"slow","max_tokens":5,"stream":true,"messages":[{"role":"user","content":"x"}]}"#.utf8),
            headers: ["Content-Type": "application/json"])
        #expect(try holder.readStreamHead() == 200)
        let count = #"{"model":"slow","messages":[{"role":"user","content":"hello"}]}"#
        let refused = try harness.client().post("/v1/messages/count_tokens", json: count)
        #expect(refused.status == 503)
        #expect(refused.header("Retry-After") == "1")
        #expect(refused.json?["type"] == "error")
        #expect(refused.json?["error"]?["type"] == "overloaded_error")
        let generation = try harness.client().post("/v1/messages", json: #"{"model":"slow","max_tokens":5,"messages":[{"role":"user","content":"x"}]}"#)
        #expect(generation.status == 503)
        _ = try holder.readUntil { $0.contains("message_stop") }
        #expect(waitUntil(seconds: 10) { (try? harness.client().post("/v1/messages/count_tokens", json: count).status) == 200 })
    }

    /// Errors the HTTP server raises itself (here 413 for a body over the limit, decided from Content-Length
    /// before the body is read) use Anthropic's envelope on `/v1/messages` (with a query too) and OpenAI's
    /// elsewhere: the server renders them by path through the daemon's dialect table.
    @Test func errorsTheHTTPServerRaisesUseTheDialectsEnvelope() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let size = 17 * 1024 * 1024
        let anthropic = try harness.client()
        try anthropic.send("POST /v1/messages?beta=true HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: \(size)\r\n\r\n")
        let tooLarge = try anthropic.readResponse()
        #expect(tooLarge.status == 413)
        #expect(tooLarge.json?["type"] == "error")
        #expect(tooLarge.json?["error"]?["type"] == "request_too_large")
        #expect(tooLarge.json?["error"]?["message"]?.stringValue?.isEmpty == false)
        let openAI = try harness.client()
        try openAI.send("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: \(size)\r\n\r\n")
        let chat = try openAI.readResponse()
        #expect(chat.status == 413)
        #expect(chat.json?["error"]?["code"] == "request_too_large")
        #expect(chat.json?["type"] == nil)
    }

    /// Errors the HTTP server raises before the header block is complete (431 for headers over the limit, 417 for
    /// an unknown expectation, 501 for an unknown transfer coding) use Anthropic's envelope on `/v1/messages` too:
    /// the path is known from the request line, before any header field (they were OpenAI's envelope).
    @Test func errorsRaisedWhileReadingTheHeadersUseTheDialectsEnvelope() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let head = "POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
        let cases = [
            // Never terminated: the server answers once the limit is crossed.
            (head + "X-Big: " + String(repeating: "a", count: 70 * 1024), 431, "invalid_request_error"),
            (head + "Expect: foo\r\nContent-Length: 2\r\n\r\n{}", 417, "invalid_request_error"),
            (head + "Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", 501, "api_error"),
        ]
        for (request, status, type) in cases {
            let client = try harness.client()
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == status, "\(response.text)")
            #expect(response.json?["type"] == "error", "\(status): \(response.text)")
            #expect(response.json?["error"]?["type"]?.stringValue == type, "\(status): \(response.text)")
            #expect(response.json?["error"]?["code"] == nil, "\(status): \(response.text)")
        }
        // Elsewhere the same error keeps OpenAI's envelope.
        let chat = try harness.client()
        try chat.send("POST /v1/chat/completions HTTP/1.1\r\nHost: localhost\r\nX-Big: " + String(repeating: "a", count: 70 * 1024))
        let openAI = try chat.readResponse()
        #expect(openAI.status == 431)
        #expect(openAI.json?["error"]?["code"] == "headers_too_large")
        #expect(openAI.json?["type"] == nil)
    }

    /// A request line the server refuses (an unsupported HTTP version, a bad method, junk after the version) still
    /// names its path, and the refusal uses that path's envelope: Anthropic's on `/v1/messages` (they were OpenAI's,
    /// since the path was only kept from a request line that parsed).
    @Test func aBadRequestLineIsRefusedInThePathsEnvelope() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let rest = "\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        let cases = [
            ("POST /v1/messages HTTP/2.0" + rest, 505, "api_error"),
            ("POST /v1/messages?beta=true HTTP/1.1 junk" + rest, 400, "invalid_request_error"),
            ("PO(ST /v1/messages/count_tokens HTTP/1.1" + rest, 400, "invalid_request_error"),
            ("POST /v1/messages HTTP/0.9" + rest, 400, "invalid_request_error"),
        ]
        for (request, status, type) in cases {
            let client = try harness.client()
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == status, "\(request.prefix(40)): \(response.text)")
            #expect(response.json?["type"] == "error", "\(request.prefix(40)): \(response.text)")
            #expect(response.json?["error"]?["type"]?.stringValue == type, "\(request.prefix(40)): \(response.text)")
        }
        // Elsewhere the same refusal keeps OpenAI's envelope.
        let chat = try harness.client()
        try chat.send("POST /v1/chat/completions HTTP/2.0" + rest)
        let openAI = try chat.readResponse()
        #expect(openAI.status == 505)
        #expect(openAI.json?["error"]?["code"] != nil)
        #expect(openAI.json?["type"] == nil)
    }

    @Test func countTokensCountsTheRequestWithoutGenerating() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"x"}]"#])
        let short = try harness.client().post("/v1/messages/count_tokens?beta=true", json: #"{"model":"demo","messages":[{"role":"user","content":"hi"}]}"#)
        #expect(short.status == 200)
        let long = try harness.client().post(
            "/v1/messages/count_tokens", json: #"{"model":"demo","system":"\#(String(repeating: "word ", count: 300))","messages":[{"role":"user","content":"hi"}]}"#)
        let shortCount = try #require(short.json?["input_tokens"]?.numberValue?.intValue)
        let longCount = try #require(long.json?["input_tokens"]?.numberValue?.intValue)
        #expect(shortCount > 0 && longCount > shortCount + 300)
        #expect(!harness.records().contains { $0["event"] == "generate" })
    }

    @Test func aToolRoundTripReachesTheBackendAsCallAndOutput() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"Sunny."}]"#])
        let body = #"{"model":"demo","max_tokens":64,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":[{"type":"text","text":"Looking."},{"type":"tool_use","id":"toolu_9","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_9","content":[{"type":"text","text":"sunny"}],"is_error":true}]}]}"#
        let response = try harness.client().post("/v1/messages", json: body, headers: Self.headers)
        #expect(response.status == 200)
        let request = try #require(harness.records().first { $0["event"] == "generate" }?["request"])
        #expect(request["tool_choice"] == ["mode": "required"])
        #expect(request["parallel_tool_calls"] == false)
        #expect(request["input"]?[2]?["type"] == "function_call")
        #expect(request["input"]?[2]?["arguments"] == #"{"city":"Paris"}"#)
        #expect(request["input"]?[3]?["output"] == "Error: sunny")
        let orphan = try harness.client().post(
            "/v1/messages",
            json: #"{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_x","content":"r"}]}]}"#)
        #expect(orphan.status == 400)
        #expect(orphan.json?["error"]?["message"]?.stringValue?.contains("messages[0].content[0].tool_use_id") == true)
    }
}
