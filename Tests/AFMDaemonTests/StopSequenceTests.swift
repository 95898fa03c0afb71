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
}
