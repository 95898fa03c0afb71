// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// `POST /v1/chat/completions` against the real daemon and the scripted backend: bodies, chunk streams, stop
/// sequences, tool calls and errors as `reference/dialects.md` §2 describes them.
@Suite struct ChatCompletionsTests {
    /// The `data:` payloads of a Chat Completions stream, `[DONE]` as the string "[DONE]".
    static func chunks(_ text: String) -> [JSONValue] {
        text.split(separator: "\n").compactMap { line -> JSONValue? in
            guard line.hasPrefix("data: ") else { return nil }
            let payload = String(line.dropFirst(6))
            return payload == "[DONE]" ? .string("[DONE]") : try? JSONParser.parse(payload)
        }
    }

    @Test func aTextAnswerIsAChatCompletion() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"Hello"},{"text":", world"}]"#])
        let response = try harness.client().post(
            "/v1/chat/completions",
            json: #"{"model":"demo","messages":[{"role":"developer","content":"Be brief."},{"role":"user","content":"hi"}],"max_completion_tokens":50}"#)
        #expect(response.status == 200)
        let body = try #require(response.json)
        #expect(body["id"]?.stringValue?.hasPrefix("chatcmpl-") == true)
        #expect(body["object"] == "chat.completion")
        #expect(body["model"] == "demo")
        #expect(body["choices"]?[0]?["message"]?["content"] == "Hello, world")
        #expect(body["choices"]?[0]?["message"]?["role"] == "assistant")
        #expect(body["choices"]?[0]?["finish_reason"] == "stop")
        #expect(body["usage"]?["completion_tokens"] == 2)
        #expect(body["usage"]?["total_tokens"]?.numberValue?.intValue == (body["usage"]?["prompt_tokens"]?.numberValue?.intValue ?? -99) + 2)
        #expect(body["usage"]?["completion_tokens_details"]?["reasoning_tokens"] == 0)
        let request = try #require(harness.records().first { $0["event"] == "generate" }?["request"])
        #expect(request["system"] == ["Be brief."])
        #expect(request["max_output_tokens"] == 50)
    }

    @Test func aStreamHasRoleFirstToolDeltasWithIndexUsageAndDone() throws {
        let script = #"[{"text":"Let me look."},{"tool_call":{"name":"get_weather","call_id":"call_1","arguments":"{\"city\":\"Paris\"}","chunks":3}},{"finish":"tool_calls"}]"#
        let harness = try DaemonHarness(models: ["demo": script])
        let tools = #"[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]"#
        let response = try harness.client().post(
            "/v1/chat/completions",
            json: #"{"model":"demo","messages":[{"role":"user","content":"weather?"}],"tools":\#(tools),"stream":true,"stream_options":{"include_usage":true}}"#)
        #expect(response.status == 200)
        #expect(response.header("Content-Type")?.contains("text/event-stream") == true)
        let chunks = Self.chunks(response.text)
        #expect(chunks.last == "[DONE]")
        let objects = chunks.dropLast()
        #expect(Set(objects.compactMap { $0["id"]?.stringValue }).count == 1)
        #expect(objects.first?["choices"]?[0]?["delta"]?["role"] == "assistant")
        #expect(objects.allSatisfy { $0["usage"] != nil })
        let toolDeltas = objects.compactMap { $0["choices"]?[0]?["delta"]?["tool_calls"]?[0] }
        #expect(toolDeltas.count == 4)
        #expect(toolDeltas.allSatisfy { $0["index"] == 0 })
        #expect(toolDeltas.first?["id"] == "call_1")
        #expect(toolDeltas.first?["function"]?["name"] == "get_weather")
        #expect(toolDeltas.dropFirst().allSatisfy { $0["id"] == nil })
        #expect(toolDeltas.compactMap { $0["function"]?["arguments"]?.stringValue }.joined() == #"{"city":"Paris"}"#)
        let finishes = objects.compactMap { $0["choices"]?[0]?["finish_reason"]?.stringValue }
        #expect(finishes == ["tool_calls"])
        let usage = try #require(objects.last)
        #expect(usage["choices"] == [])
        #expect(usage["usage"]?["completion_tokens"] != nil)
    }

    @Test func aStopSequenceEndsTheTextBeforeItAndCancelsTheGeneration() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"one two "},{"text":"thr"},{"text":"ee four"},{"repeat":200,"steps":[{"text":" more"},{"delay_ms":10}]}]"#])
        let client = try harness.client()
        let response = try client.post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"count"}],"stop":["three","zzz"]}"#)
        #expect(response.status == 200)
        #expect(response.json?["choices"]?[0]?["message"]?["content"] == "one two ")
        #expect(response.json?["choices"]?[0]?["finish_reason"] == "stop")
        let streamed = try harness.client().post(
            "/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"count"}],"stop":"ee f","stream":true}"#)
        let text = Self.chunks(streamed.text).compactMap { $0["choices"]?[0]?["delta"]?["content"]?.stringValue }.joined()
        #expect(text == "one two thr")
        // The generation was cancelled at the stop sequence, not played to its end.
        #expect(waitUntil(seconds: 5) { harness.records().filter { $0["event"] == "cancel" }.count == 2 })
    }

    @Test func aCappedAnswerFinishesWithLength() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"a"},{"finish":"length"}]"#])
        let response = try harness.client().post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}],"max_tokens":1}"#)
        #expect(response.json?["choices"]?[0]?["finish_reason"] == "length")
        #expect(harness.records().first { $0["event"] == "generate" }?["request"]?["max_output_tokens"] == 1)
    }

    @Test func aFailureMidStreamIsAnErrorChunkThenDone() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"partial"},{"error":{"code":"rate_limited","message":"slow down"}}]"#])
        let response = try harness.client().post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}],"stream":true}"#)
        let chunks = Self.chunks(response.text)
        #expect(chunks.last == "[DONE]")
        let error = try #require(chunks.dropLast().last?["error"])
        #expect(error["code"] == "rate_limited")
        #expect(error["type"] == "rate_limit_error")
        let plain = try harness.client().post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}]}"#)
        #expect(plain.status == 429)
        #expect(plain.json?["error"]?["code"] == "rate_limited")
    }

    @Test func aToolOutputMustAnswerAnEarlierCall() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let response = try harness.client().post(
            "/v1/chat/completions",
            json: #"{"model":"demo","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_b","content":"r"}]}"#)
        #expect(response.status == 400)
        #expect(response.json?["error"]?["param"] == "messages[2].tool_call_id")
        #expect(response.json?["error"]?["type"] == "invalid_request_error")
    }
}
