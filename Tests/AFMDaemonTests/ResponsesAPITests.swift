// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The Responses API subset end to end through a real afmd: tools, images, reasoning, budgets.
@Suite struct ResponsesAPITests {
    static let onePixelPNG =
        "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

    func generateRequests(_ harness: DaemonHarness) -> [JSONValue] {
        harness.records().filter { $0["event"] == "generate" }.compactMap { $0["request"] }
    }

    @Test func functionToolsReachTheBackendWithTheirSchemaOrder() throws {
        let harness = try DaemonHarness(models: [
            "tools": #"[{"tool_call":{"name":"get_weather","call_id":"call_1","arguments":"{\"city\":\"SF\",\"unit\":\"c\"}","chunks":2}}]"#
        ])
        let body = #"""
            {"model":"tools","input":"weather?","tool_choice":{"type":"function","name":"get_weather"},
             "tools":[{"type":"function","name":"get_weather","description":"Weather","parameters":{"type":"object",
               "properties":{"unit":{"type":"string","enum":["c","f"]},"city":{"type":"string","pattern":"^[A-Z]"}},"required":["city"],"additionalProperties":false}},
              {"type":"web_search"}]}
            """#
        let response = try harness.client().post("/v1/responses", json: body)
        #expect(response.status == 200, "\(response)")
        let warnings = response.headers.filter { $0.name.lowercased() == "x-afm-warning" }.map(\.value)
        #expect(warnings.contains { $0.contains("web_search") })
        #expect(warnings.contains { $0.contains("pattern") })
        let call = try #require(response.json?["output"]?[0])
        #expect(call["type"] == "function_call")
        #expect(call["call_id"] == "call_1")
        #expect(call["arguments"] == #"{"city":"SF","unit":"c"}"#)
        let sent = try #require(generateRequests(harness).last)
        #expect(sent["tool_choice"] == ["mode": "function", "name": "get_weather"])
        let tools = try #require(sent["tools"]?.arrayValue)
        #expect(tools.count == 1)
        #expect(tools[0]["parameters"]?["properties"]?.objectValue?.keys == ["unit", "city"])
    }

    @Test func namespaceAndCustomToolsAndParallelCalls() throws {
        let steps = #"""
            [{"tool_call":{"name":"read_file","call_id":"call_a","arguments":"{\"path\":\"x\"}"}},
             {"tool_call":{"name":"apply_patch","call_id":"call_b","arguments":"{\"input\":\"*** Begin Patch\"}"}}]
            """#
        let harness = try DaemonHarness(models: ["agent": steps])
        let tools = #"""
            "tools":[{"type":"namespace","name":"mcp__fs","description":"files","tools":[{"type":"function","name":"read_file","parameters":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}}]},
                     {"type":"custom","name":"apply_patch","description":"Apply a patch"}]
            """#
        let parallel = try harness.client().post("/v1/responses", json: #"{"model":"agent","input":"go",\#(tools)}"#)
        #expect(parallel.status == 200, "\(parallel)")
        let output = try #require(parallel.json?["output"]?.arrayValue)
        #expect(output.count == 2)
        #expect(output[0]["namespace"] == "mcp__fs")
        #expect(output[1]["type"] == "custom_tool_call")
        #expect(output[1]["input"] == "*** Begin Patch")
        let sent = try #require(generateRequests(harness).last?["tools"]?.arrayValue)
        #expect(sent.map { $0["namespace"] } == ["mcp__fs", .null])

        let single = try harness.client().post("/v1/responses", json: #"{"model":"agent","input":"go","parallel_tool_calls":false,\#(tools)}"#)
        #expect(single.json?["output"]?.arrayValue?.count == 1)

        let stream = try harness.client().post("/v1/responses", json: #"{"model":"agent","input":"go","stream":true,\#(tools)}"#)
        let types = stream.events.map(\.event)
        #expect(types.contains("response.custom_tool_call_input.done"))
        #expect(types.last == "response.completed")
    }

    /// A call the output cap cuts reaches the host as TOOL_CALL_END then DONE/length (every backend ends its open
    /// calls when it stops); the response and that call are both `incomplete`, streamed or not.
    @Test func aToolCallCutByMaxOutputTokensIsIncomplete() throws {
        let steps = #"""
            [{"tool_call":{"name":"get_weather","call_id":"call_cut","arguments":"{\"city\":\"Par","chunks":2}},{"finish":"length"}]
            """#
        let harness = try DaemonHarness(models: ["cut": steps])
        let request = #"""
            {"model":"cut","input":"weather?","max_output_tokens":16,
             "tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}]
            """#
        let plain = try harness.client().post("/v1/responses", json: request + "}")
        #expect(plain.status == 200, "\(plain)")
        #expect(plain.json?["status"] == "incomplete")
        #expect(plain.json?["incomplete_details"]?["reason"] == "max_output_tokens")
        let call = try #require(plain.json?["output"]?[0])
        #expect(call["type"] == "function_call")
        #expect(call["call_id"] == "call_cut")
        #expect(call["arguments"] == #"{"city":"Par"#)
        #expect(call["status"] == "incomplete")

        let stream = try harness.client().post("/v1/responses", json: request + #","stream":true}"#)
        #expect(stream.status == 200, "\(stream)")
        let events = stream.events
        #expect(
            events.suffix(3).map(\.event) == ["response.function_call_arguments.done", "response.output_item.done", "response.incomplete"])
        let done = try #require(events.last { $0.event == "response.output_item.done" })
        #expect(done.data["item"]?["call_id"] == "call_cut")
        #expect(done.data["item"]?["status"] == "incomplete")
        let final = try #require(events.last?.data["response"])
        #expect(final["status"] == "incomplete")
        #expect(final["output"]?[0]?["status"] == "incomplete")
        #expect(final["output"]?[0]?["arguments"] == #"{"city":"Par"#)
    }

    @Test func toolOutputsMustAnswerAnEarlierCall() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let client = try harness.client()
        let good = #"""
            {"model":"m","input":[{"role":"user","content":"hi"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},
             {"type":"function_call_output","call_id":"c1","output":"42"}]}
            """#
        #expect(try client.post("/v1/responses", json: good).status == 200)
        let sent = try #require(generateRequests(harness).last?["input"]?.arrayValue)
        #expect(sent.map { $0["type"] } == ["message", "function_call", "function_call_output"])
        let bad = good.replacingOccurrences(of: #""call_id":"c1","output""#, with: #""call_id":"c9","output""#)
        let refused = try client.post("/v1/responses", json: bad)
        #expect(refused.status == 400)
        #expect(refused.json?["error"]?["param"] == "input[2].call_id")
    }

    @Test func imagesReachVisionModelsOnly() throws {
        let harness = try DaemonHarness(models: [
            "eyes": #"{"capabilities":{"streaming":true,"tools":false,"vision":true,"reasoning":false},"steps":[{"text":"a pixel"}]}"#,
            "text": #"[{"text":"no"}]"#,
        ])
        let client = try harness.client()
        func body(_ model: String, images: Int) -> String {
            let parts = (0..<images).map { _ in #"{"type":"input_image","image_url":"\#(Self.onePixelPNG)"}"# }.joined(separator: ",")
            return #"{"model":"\#(model)","input":[{"role":"user","content":[{"type":"input_text","text":"what?"},\#(parts)]}]}"#
        }
        let seen = try client.post("/v1/responses", json: body("eyes", images: 1))
        #expect(seen.status == 200, "\(seen)")
        let part = try #require(generateRequests(harness).last?["input"]?[0]?["content"]?[1])
        #expect(part["type"] == "image")
        #expect(part["mime_type"] == "image/png")
        #expect(part["width"] == 1 && part["height"] == 1)
        #expect(part["data_base64"]?.stringValue?.isEmpty == false)

        let blind = try client.post("/v1/responses", json: body("text", images: 1))
        #expect(blind.status == 400)
        #expect(blind.json?["error"]?["code"] == "unsupported_capability")
        let tooMany = try client.post("/v1/responses", json: body("eyes", images: 5))
        #expect(tooMany.status == 400)
        #expect(tooMany.json?["error"]?["code"] == "too_many_images")
        let remote = try client.post(
            "/v1/responses", json: #"{"model":"eyes","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.png"}]}]}"#)
        #expect(remote.status == 400)
        #expect(remote.json?["error"]?["param"] == "input[0].content[0].image_url")
    }

    /// A backend's token counts are untrusted: counts near Int64.max once made `total_tokens` (input + output)
    /// overflow and trap, killing the daemon and every stream it served. Counts are capped where the host reads them.
    @Test func hugeTokenCountsFromABackendNeitherCrashNorOverflow() throws {
        let huge = #"[{"text":"x"},{"usage":{"input_tokens":9223372036854775807,"output_tokens":9223372036854775807,"reasoning_tokens":9223372036854775807,"cached_tokens":9223372036854775807}}]"#
        let harness = try DaemonHarness(models: ["huge": huge])
        let client = try harness.client()
        for path in ["/v1/responses", "/v1/chat/completions"] {
            let body = path == "/v1/responses"
                ? #"{"model":"huge","input":"hi"}"# : #"{"model":"huge","messages":[{"role":"user","content":"hi"}]}"#
            let answer = try client.post(path, json: body)
            #expect(answer.status == 200, "\(answer)")
            let total = answer.json?["usage"]?["total_tokens"]?.numberValue?.intValue ?? -1
            #expect(total > 0 && total <= 2 * Int(UInt32.max), "\(answer.text)")
        }
        #expect(try client.get("/health").status == 200)
    }

    @Test func reasoningStateIsSealedAndReplayed() throws {
        let reasoning = #"{"capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":true,"reasoning_optional":false},"steps":[{"reasoning_state":"secret-chain-of-thought"},{"usage":{"input_tokens":3,"output_tokens":4,"reasoning_tokens":3,"cached_tokens":0}},{"text":"answer"}]}"#
        let harness = try DaemonHarness(models: ["thinker": reasoning, "other": reasoning, "plain": #"[{"text":"x"}]"#])
        let client = try harness.client()
        let first = try client.post("/v1/responses", json: #"{"model":"thinker","input":"think","reasoning":{"effort":"high"},"include":["reasoning.encrypted_content"]}"#)
        #expect(first.status == 200, "\(first)")
        let item = try #require(first.json?["output"]?[0])
        #expect(item["type"] == "reasoning")
        #expect(item["summary"] == [])
        let blob = try #require(item["encrypted_content"]?.stringValue)
        #expect(!blob.contains("secret"))
        #expect(!first.text.contains("secret-chain-of-thought"))
        #expect(first.json?["usage"]?["output_tokens_details"]?["reasoning_tokens"] == 3)
        #expect(generateRequests(harness).last?["reasoning_effort"] == "high")

        func replay(_ model: String, _ content: String) throws -> TestHTTPClient.Response {
            try client.post(
                "/v1/responses",
                json: #"{"model":"\#(model)","input":[{"role":"user","content":"q"},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"\#(content)"},{"role":"assistant","content":"answer"},{"role":"user","content":"more"}]}"#)
        }
        #expect(try replay("thinker", blob).status == 200)
        let state = try #require(generateRequests(harness).last?["input"]?.arrayValue?.first { $0["type"] == "reasoning" })
        #expect(state["state_base64"] == .string(Data("secret-chain-of-thought".utf8).base64EncodedString()))

        var tampered = Array(blob)
        tampered[tampered.count - 5] = tampered[tampered.count - 5] == "A" ? "B" : "A"
        for (model, content) in [("thinker", String(tampered)), ("other", blob), ("thinker", "garbage")] {
            let refused = try replay(model, content)
            #expect(refused.status == 400)
            #expect(refused.json?["error"]?["code"] == "invalid_encrypted_content")
            #expect(refused.json?["error"]?["param"] == "input[1].encrypted_content")
        }
        // Effort on a model that does not reason, and "none" on one that cannot stop reasoning.
        let plain = try client.post("/v1/responses", json: #"{"model":"plain","input":"x","reasoning":{"effort":"low"}}"#)
        #expect(plain.json?["error"]?["code"] == "unsupported_capability")
        let none = try client.post("/v1/responses", json: #"{"model":"thinker","input":"x","reasoning":{"effort":"none"}}"#)
        #expect(none.json?["error"]?["code"] == "unsupported_capability")

        // A blob from a previous daemon instance is refused after a restart.
        #expect(harness.daemon.stop() == 0)
        let restarted = try DaemonHarness(models: ["thinker": reasoning])
        let stale = try restarted.client().post(
            "/v1/responses",
            json: #"{"model":"thinker","input":[{"role":"user","content":"q"},{"type":"reasoning","summary":[],"encrypted_content":"\#(blob)"},{"role":"user","content":"more"}]}"#)
        #expect(stale.status == 400)
        #expect(stale.json?["error"]?["code"] == "invalid_encrypted_content")
    }

    @Test func budgetsAreCheckedAndTruncationDropsOldTurns() throws {
        let harness = try DaemonHarness(models: ["tiny": #"{"context_tokens":200,"steps":[{"text":"ok"}]}"#])
        let client = try harness.client()
        let status = try client.get("/status").json
        let budgets = status?["models"]?[0]?["budgets"]
        #expect(budgets?["max_input_tokens"] == 150)
        #expect(budgets?["max_output_tokens"] == 50)

        let long = String(repeating: "word ", count: 300)
        let oversized = try client.post("/v1/responses", json: #"{"model":"tiny","input":"\#(long)"}"#)
        #expect(oversized.status == 400)
        #expect(oversized.json?["error"]?["code"] == "context_length_exceeded")
        let message = oversized.json?["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("150"))

        let history = (0..<6).map { turn in
            #"{"role":"user","content":"question \#(turn) \#(String(repeating: "filler ", count: 20))"},{"role":"assistant","content":"answer \#(turn)"}"#
        }.joined(separator: ",")
        let body = #"{"model":"tiny","instructions":"be brief","input":[\#(history),{"role":"user","content":"the current question"}],"truncation":"auto"}"#
        let truncated = try client.post("/v1/responses", json: body)
        #expect(truncated.status == 200, "\(truncated)")
        let dropped = try #require(truncated.header("x-afm-truncated-turns").flatMap(Int.init))
        #expect(dropped >= 1)
        let sent = try #require(generateRequests(harness).last)
        #expect(sent["system"] == ["be brief"])
        let texts = sent["input"]?.arrayValue?.compactMap { $0["content"]?[0]?["text"]?.stringValue } ?? []
        #expect(texts.last == "the current question")
        #expect(!texts.contains { $0.hasPrefix("question 0") })

        let disabled = try client.post("/v1/responses", json: body.replacingOccurrences(of: #""truncation":"auto""#, with: #""truncation":"disabled""#))
        #expect(disabled.json?["error"]?["code"] == "context_length_exceeded")

        // max_output_tokens above the budget is clamped and echoed.
        let clamped = try client.post("/v1/responses", json: #"{"model":"tiny","input":"hi","max_output_tokens":100000}"#)
        #expect(clamped.json?["max_output_tokens"] == 50)
        #expect(generateRequests(harness).last?["max_output_tokens"] == 50)
    }

    /// `truncation: "auto"` drops the fewest turns that fit by the backend's own count. The scripted backend counts
    /// text bytes / 4 against a 3072-token budget: six old turns of a "u" and 150 "ok" answers (75 tokens each), a
    /// turn of 4000 bytes (1000 tokens), then the current 7300-byte question. Dropping k turns counts 3277, 3202,
    /// 3127, 3052, 2976, 2901, 2826, 1825 (k = 0...7): dropping three is the answer. The estimate (4 tokens per
    /// item) overprices the many small items: the whole input's ratio predicts dropping one turn, which does not
    /// fit, and only dropping all seven fits by estimate. Between the two nothing was tried: 7 turns were dropped.
    @Test func truncationDropsTheFewestTurnsTheTokenizerFits() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let answers = Array(repeating: #"{"role":"assistant","content":"ok"}"#, count: 150).joined(separator: ",")
        let old = (0..<6).map { _ in #"{"role":"user","content":"u"},\#(answers)"# }.joined(separator: ",")
        let big = #"{"role":"user","content":"\#(String(repeating: "x", count: 4000))"},{"role":"assistant","content":"ok"}"#
        let current = #"{"role":"user","content":"\#(String(repeating: "y", count: 7300))"}"#
        let body = #"{"model":"m","input":[\#(old),\#(big),\#(current)],"truncation":"auto"}"#
        let response = try harness.client().post("/v1/responses", json: body)
        #expect(response.status == 200, "\(response.text.prefix(300))")
        #expect(response.header("x-afm-truncated-turns") == "3")
        let sent = try #require(generateRequests(harness).last)
        #expect(sent["input"]?.arrayValue?.count == (6 - 3) * 151 + 3)
    }

    /// `truncation: "auto"` over 20,000 turns finds its cut in one pass: two such requests at once are answered
    /// well before the processing deadline, and a Chat stream sent meanwhile completes (each dropped turn used to
    /// rebuild, re-encode and re-count the whole input: minutes of CPU on the event loop, past the deadline, with
    /// every other stream stalled behind it). A turn is 20 bytes: the estimate (11 tokens) never fits the 9-token
    /// budget, the scripted backend's exact count (5 per turn) fits one turn only, so all but the current turn go.
    @Test func truncatingTwentyThousandTurnsIsOnePassAndStallsNoOtherStream() throws {
        let harness = try DaemonHarness(
            models: [
                "tiny": #"{"context_tokens":4096,"max_input_tokens":9,"steps":[{"text":"ok"}]}"#,
                "chat": #"[{"text":"one"},{"delay_ms":20},{"text":" two"}]"#,
            ],
            config: "[Server]\nProcessingDeadlineSeconds=30\n")
        let turn = #"{"role":"user","content":"aaaaaaaaaaaaaaaaaaaa"}"#
        let body = #"{"model":"tiny","input":[\#(Array(repeating: turn, count: 20_000).joined(separator: ","))],"truncation":"auto"}"#
        let port = harness.port
        let big = (0..<2).map { _ in
            Thread.detachNewThreadWithResult { try? TestHTTPClient(port: port, timeoutSeconds: 60).post("/v1/responses", json: body) }
        }
        let stream = try TestHTTPClient(port: harness.port, timeoutSeconds: 60).post(
            "/v1/chat/completions", json: #"{"model":"chat","messages":[{"role":"user","content":"x"}],"stream":true}"#)
        #expect(stream.status == 200)
        let chunks = ChatCompletionsTests.chunks(stream.text)
        #expect(chunks.last == "[DONE]")
        #expect(chunks.compactMap { $0["choices"]?[0]?["delta"]?["content"]?.stringValue }.joined() == "one two")
        for result in big {
            let response = try #require(result.value)
            #expect(response.status == 200, "\(response.text.prefix(300))")
            #expect(response.header("x-afm-truncated-turns") == "19999")
        }
        let sent = generateRequests(harness).filter { $0["model"] == "tiny" }
        #expect(sent.count == 2)
        #expect(sent.allSatisfy { $0["input"]?.arrayValue?.count == 1 })
    }

    @Test func theCommonPromptComesFirst() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#], config: "[Responses]\nCommonPrompt=Always be kind.\n")
        _ = try harness.client().post("/v1/responses", json: #"{"model":"m","instructions":"Be brief.","input":[{"role":"developer","content":"dev"},{"role":"user","content":"x"}]}"#)
        #expect(generateRequests(harness).last?["system"] == ["Always be kind.", "Be brief.", "dev"])
    }

    @Test func unavailableAndErrorStatuses() throws {
        let harness = try DaemonHarness(models: [
            "quota": #"[{"error":{"code":"quota_exceeded","message":"daily quota used up"}}]"#,
            "busy": #"[{"error":{"code":"busy","message":"try later"}}]"#,
        ])
        let client = try harness.client()
        #expect(try client.post("/v1/responses", json: responsesBody(model: "quota")).status == 429)
        #expect(try client.post("/v1/responses", json: responsesBody(model: "busy")).status == 503)
    }
}
