// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Stop sequences on Chat Completions (`stop`) and Messages (`stop_sequences`) against the real daemon and the
/// scripted backend: their limits, matching by Unicode scalar (as llama.cpp and OpenAI match), and their refusal
/// with a structured answer.
@Suite struct StopSequenceTests {
    /// The answer's text, from a body or a stream, in either dialect.
    static func text(_ response: TestHTTPClient.Response, messages: Bool, stream: Bool) -> String? {
        switch (messages, stream) {
        case (false, false): response.json?["choices"]?[0]?["message"]?["content"]?.stringValue
        case (false, true):
            ChatCompletionsTests.chunks(response.text).compactMap { $0["choices"]?[0]?["delta"]?["content"]?.stringValue }.joined()
        case (true, false): response.json?["content"]?[0]?["text"]?.stringValue
        case (true, true):
            TestHTTPClient.parseEvents(response.text).compactMap { $0.data["delta"]?["text"]?.stringValue }.joined()
        }
    }

    /// One string of more than 256 bytes is refused like a list element of that size (it was unbounded, and the
    /// builder did work proportional to its length for every delta).
    @Test func aStopSequenceIsAtMost256BytesInEveryForm() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let client = try harness.client()
        let long = String(repeating: "s", count: 257)
        let fits = String(repeating: "s", count: 256)
        let single = try client.post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}],"stop":"\#(long)"}"#)
        #expect(single.status == 400)
        #expect(single.json?["error"]?["param"] == "stop")
        #expect(single.json?["error"]?["code"] == "invalid_value")
        let listed = try client.post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}],"stop":["\#(long)"]}"#)
        #expect(listed.status == 400)
        #expect(listed.json?["error"]?["param"] == "stop[0]")
        let messages = try client.post(
            "/v1/messages", json: #"{"model":"demo","max_tokens":5,"stop_sequences":["\#(long)"],"messages":[{"role":"user","content":"x"}]}"#)
        #expect(messages.status == 400)
        #expect(messages.json?["error"]?["type"] == "invalid_request_error")
        #expect(messages.json?["error"]?["message"]?.stringValue?.contains("stop_sequences[0]") == true)
        let accepted = try client.post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":"x"}],"stop":"\#(fits)"}"#)
        #expect(accepted.status == 200)
        #expect(accepted.json?["choices"]?[0]?["message"]?["content"] == "ok")
    }

    /// "\r\n" is one Swift Character but two scalars: a stop "\n" matches inside it, a stop "\r\n" split across
    /// deltas is held back and matched, and a stop "e" matches the "e" of a decomposed "é" (the answer is cut at a
    /// scalar boundary). Streamed and not, in both dialects.
    @Test func stopSequencesMatchUnicodeScalarsNotGraphemes() throws {
        let cases: [(model: String, stop: String, expected: String)] = [
            ("crlf", #"\n"#, "ab\r"),
            ("split", #"\r\n"#, "abc"),
            ("accent", "e", "caf"),
        ]
        let harness = try DaemonHarness(models: [
            "crlf": #"[{"text":"ab\r\ncd"}]"#,
            "split": #"[{"text":"abc\r"},{"text":"\ndef"}]"#,
            "accent": #"[{"text":"cafe\u0301 ole"}]"#,
        ])
        for (model, stop, expected) in cases {
            for stream in [false, true] {
                let chat = try harness.client().post(
                    "/v1/chat/completions",
                    json: #"{"model":"\#(model)","messages":[{"role":"user","content":"x"}],"stop":["\#(stop)"],"stream":\#(stream)}"#)
                #expect(chat.status == 200)
                #expect(Self.text(chat, messages: false, stream: stream)?.unicodeScalars.elementsEqual(expected.unicodeScalars) == true, "chat \(model) stream \(stream): \(chat.text)")
                let messages = try harness.client().post(
                    "/v1/messages",
                    json: #"{"model":"\#(model)","max_tokens":50,"messages":[{"role":"user","content":"x"}],"stop_sequences":["\#(stop)"],"stream":\#(stream)}"#)
                #expect(messages.status == 200)
                #expect(Self.text(messages, messages: true, stream: stream)?.unicodeScalars.elementsEqual(expected.unicodeScalars) == true, "messages \(model) stream \(stream): \(messages.text)")
                if !stream { #expect(messages.json?["stop_reason"] == "stop_sequence") }
            }
        }
    }

    /// A stop sequence would cut a structured answer into JSON the client's parser chokes on: refused at
    /// validation with a 400 naming the stop field (it was a 500 the SDKs retried).
    @Test func aStopSequenceWithAStructuredAnswerIsRefusedUpFront() throws {
        let capabilities = #""capabilities":{"streaming":true,"tools":true,"structured_output":true}"#
        let harness = try DaemonHarness(models: ["json": #"{\#(capabilities),"steps":[{"text":"{\"a\":\"x}y\"}"}]}"#])
        let client = try harness.client()
        let chat = try client.post(
            "/v1/chat/completions",
            json: #"{"model":"json","messages":[{"role":"user","content":"x"}],"stop":"}","response_format":{"type":"json_object"}}"#)
        #expect(chat.status == 400)
        #expect(chat.json?["error"]?["param"] == "stop")
        #expect(chat.json?["error"]?["code"] == "unsupported_parameter")
        let messages = try client.post(
            "/v1/messages",
            json: #"{"model":"json","max_tokens":50,"messages":[{"role":"user","content":"x"}],"stop_sequences":["}"],"output_config":{"format":{"type":"json_schema","schema":{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}}}}"#)
        #expect(messages.status == 400)
        #expect(messages.json?["error"]?["type"] == "invalid_request_error")
        #expect(messages.json?["error"]?["message"]?.stringValue?.contains("stop_sequences") == true, "\(messages.text)")
        // Without a stop sequence the same structured request is answered.
        let plain = try client.post(
            "/v1/chat/completions", json: #"{"model":"json","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}"#)
        #expect(plain.status == 200)
    }
}
