// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The local backend end to end: real llama.cpp, real SmolLM2-135M, real afmd. Assertions are about what the
/// backend guarantees (streaming, UTF-8, caps, usage, cache reuse, cancellation, grammar-valid tool calls), not
/// about the tiny model's judgement.
@Suite struct LocalBackendTests {
    static let modelID = "smollm2-135m-instruct"

    @Test func servesARealStreamedAnswerAndDescribesItself() throws {
        let local = try LocalDaemon()
        let client = try local.client()
        let models = try client.get("/v1/models").json?["data"]?.arrayValue ?? []
        let model = try #require(models.first { $0["id"] == .string(Self.modelID) })
        #expect(model["context_window"] == 2048)
        #expect(model["max_input_tokens"] == 1536)
        #expect(model["max_output_tokens"] == 512)
        #expect(try local.status()?["state"] == "ready")

        let response = try client.post(
            "/v1/responses",
            json: #"{"model":"on-device","input":"What is the capital of France? Answer in one sentence.","stream":true,"max_output_tokens":48,"temperature":0}"#)
        #expect(response.status == 200)
        let events = response.events
        #expect(events.first?.event == "response.created")
        let deltas = events.filter { $0.event == "response.output_text.delta" }.compactMap { $0.data["delta"]?.stringValue }
        #expect(deltas.count >= 2)
        let text = deltas.joined()
        #expect(!text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        // Deltas never split a UTF-8 character: a split one would arrive as U+FFFD.
        #expect(!text.contains("\u{FFFD}"))
        let final = try #require(events.last)
        #expect(["response.completed", "response.incomplete"].contains(final.event))
        #expect(final.data["response"]?["model"] == .string(Self.modelID))
        let usage = try #require(final.data["response"]?["usage"])
        #expect((usage["input_tokens"]?.numberValue?.intValue ?? 0) > 10)
        #expect(usage["output_tokens"]?.numberValue?.intValue == deltas.count || (usage["output_tokens"]?.numberValue?.intValue ?? 0) >= deltas.count)
    }

    @Test func theOutputCapEndsIncomplete() throws {
        let local = try LocalDaemon()
        let response = try local.client().post(
            "/v1/responses", json: #"{"model":"\#(Self.modelID)","input":"Write a long story about a dragon.","max_output_tokens":6}"#)
        #expect(response.status == 200)
        #expect(response.json?["status"] == "incomplete")
        #expect(response.json?["incomplete_details"]?["reason"] == "max_output_tokens")
        #expect(response.json?["usage"]?["output_tokens"] == 6)
    }

    @Test func aResentHistoryReusesTheCachedPrefix() throws {
        let local = try LocalDaemon(settings: "ParallelSequences=1\n")
        let client = try local.client()
        let history = (0..<6).map { turn in
            #"{"role":"user","content":"Tell me fact number \#(turn) about rivers, lakes and the sea in a few words."},{"role":"assistant","content":"Rivers flow to the sea; lakes hold fresh water; the sea is salty, fact \#(turn)."}"#
        }.joined(separator: ",")
        let first = try client.post("/v1/responses", json: #"{"model":"on-device","input":[\#(history),{"role":"user","content":"And one more?"}],"max_output_tokens":4}"#)
        #expect(first.status == 200)
        let second = try client.post(
            "/v1/responses",
            json: #"{"model":"on-device","input":[\#(history),{"role":"user","content":"And one more?"},{"role":"assistant","content":"Sure."},{"role":"user","content":"Thanks, another one?"}],"max_output_tokens":4}"#)
        #expect(second.status == 200)
        let input = second.json?["usage"]?["input_tokens"]?.numberValue?.intValue ?? 0
        let cached = second.json?["usage"]?["input_tokens_details"]?["cached_tokens"]?.numberValue?.intValue ?? 0
        #expect(cached > 0, "no prefix reuse: \(second)")
        #expect(cached < input)
    }

    @Test func aDisconnectStopsDecodingPromptly() throws {
        let local = try LocalDaemon()
        let client = try local.startLongStream()
        let closedAt = Date()
        client.close()
        var stoppedAfter: TimeInterval?
        while Date().timeIntervalSince(closedAt) < 10 {
            if (try? local.status()?["inflight"]) == 0 {
                stoppedAfter = Date().timeIntervalSince(closedAt)
                break
            }
            usleep(2_000)
        }
        let seconds = try #require(stoppedAfter, "the generation did not end after the client left")
        // Polled over HTTP from another process, so this bound includes the polling; the backend stops between
        // tokens, and a token takes ~10 ms here.
        #expect(seconds < 0.5, "generation ended \(Int(seconds * 1000)) ms after the disconnect")
    }

    static let weatherTool = #"""
        {"type":"function","name":"get_weather","description":"Current weather for a city",
         "parameters":{"type":"object","properties":{"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},
                       "required":["city","unit"],"additionalProperties":false}}
        """#

    /// One forced call (`parallel_tool_calls: false`), so the answer is complete: with parallel calls the tiny model
    /// keeps calling until `max_output_tokens` cuts the last call off (an `incomplete` response), which says
    /// nothing about the grammar. Greedy: a sampled string argument once ran past the 96 tokens (`make test`, quiet
    /// machine), which says nothing about the grammar either.
    @Test(arguments: [#""required""#, #"{"type":"function","name":"get_weather"}"#])
    func forcedToolCallsAlwaysMatchTheSchema(choice: String) throws {
        let local = try LocalDaemon()
        let client = try local.client()
        for prompt in ["What's the weather in Paris?", "Tell me a joke about cats."] {
            let response = try client.post(
                "/v1/responses",
                json: #"{"model":"on-device","input":"\#(prompt)","tools":[\#(Self.weatherTool)],"tool_choice":\#(choice),"parallel_tool_calls":false,"max_output_tokens":96,"temperature":0}"#)
            #expect(response.status == 200, "\(response)")
            #expect(response.json?["status"] == "completed", "\(response)")
            let calls = response.json?["output"]?.arrayValue?.filter { $0["type"] == "function_call" } ?? []
            #expect(calls.count == 1, "\(prompt): not exactly one call in \(response)")
            for call in calls {
                #expect(call["name"] == "get_weather")
                #expect(call["call_id"]?.stringValue?.isEmpty == false)
                let arguments = try JSONParser.parse(call["arguments"]?.stringValue ?? "")
                #expect(arguments["city"]?.stringValue != nil, "\(arguments)")
                #expect(["celsius", "fahrenheit"].contains(arguments["unit"]?.stringValue ?? ""), "\(arguments)")
                let keys = Set(arguments.objectValue?.keys ?? [])
                #expect(keys.isSubset(of: ["city", "unit"]))
            }
        }
    }

    @Test func afterAToolOutputTheModelAnswersWithText() throws {
        let local = try LocalDaemon()
        let body = #"""
            {"model":"on-device","tools":[\#(Self.weatherTool)],"tool_choice":"none","max_output_tokens":40,
             "input":[{"role":"user","content":"What's the weather in Paris?"},
                      {"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\",\"unit\":\"celsius\"}"},
                      {"type":"function_call_output","call_id":"call_1","output":"{\"temperature\":21,\"sky\":\"clear\"}"}]}
            """#
        let response = try local.client().post("/v1/responses", json: body)
        #expect(response.status == 200, "\(response)")
        let output = response.json?["output"]?.arrayValue ?? []
        #expect(output.allSatisfy { $0["type"] == "message" })
        #expect(output.first?["content"]?[0]?["text"]?.stringValue?.isEmpty == false)
    }

    @Test func anOversizedInputIsRefusedBeforeGeneration() throws {
        let local = try LocalDaemon()
        let long = String(repeating: "lorem ipsum dolor sit amet ", count: 600)
        let response = try local.client().post("/v1/responses", json: #"{"model":"on-device","input":"\#(long)"}"#)
        #expect(response.status == 400)
        #expect(response.json?["error"]?["code"] == "context_length_exceeded")
        #expect(response.json?["error"]?["message"]?.stringValue?.contains("1536") == true)
    }

    @Test func aMissingModelIsReportedAndTheDaemonStaysUp() throws {
        let local = try LocalDaemon(model: "/nonexistent/model.gguf")
        let status = try #require(try local.status())
        #expect(status["state"] == "unavailable")
        #expect(status["reason_code"] == "model_missing")
        #expect(status["reason"]?.stringValue?.contains("/nonexistent/model.gguf") == true)
        let response = try local.client().post("/v1/responses", json: #"{"model":"on-device","input":"hi"}"#)
        #expect(response.status == 503)
        #expect(response.json?["error"]?["code"] == "model_unavailable")
        #expect(try local.client().get("/health").status == 200)
    }
}
