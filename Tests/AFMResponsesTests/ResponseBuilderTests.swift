// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON
import AFMResponses
import Testing

/// The SSE lifecycle of reference/responses-api.md §1.7–1.10, fed backend events directly.
@Suite struct ResponseBuilderTests {
    func builder(_ body: String = #"{"model":"m","input":"hi"}"#, cap: Int = 100) throws -> ResponseBuilder {
        ResponseBuilder(
            responseID: "resp_1", request: try ResponsesRequest(body: Array(body.utf8)), model: "m", maxOutputTokens: cap,
            estimatedInputTokens: 3, createdAt: 1_760_000_000)
    }

    func run(_ events: [BackendEvent], builder: inout ResponseBuilder) -> [JSONValue] {
        var out = builder.start()
        for event in events { out += builder.consume(event, now: 1_760_000_001) }
        return out
    }

    @Test func plainTextFollowsTheExactLifecycle() throws {
        var builder = try builder()
        let events = run(
            [.textDelta("Hel"), .textDelta("lo!"), .usage(BackendUsage(inputTokens: 9, outputTokens: 2)), .done(.stop)],
            builder: &builder)
        #expect(
            events.map { $0["type"]!.stringValue! } == [
                "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
                "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                "response.content_part.done", "response.output_item.done", "response.completed",
            ])
        #expect(events.map { $0["sequence_number"]!.numberValue!.intValue! } == Array(0..<10))
        #expect(events[0]["response"]?["status"] == "in_progress")
        #expect(events[6]["text"] == "Hello!")
        let final = try #require(events.last?["response"])
        #expect(final["status"] == "completed")
        #expect(final["output"]?[0]?["content"]?[0]?["text"] == "Hello!")
        #expect(final["output"]?[0]?["content"]?[0]?["annotations"] == [])
        let usage = try #require(final["usage"])
        #expect(usage["input_tokens"] == 9)
        #expect(usage["output_tokens"] == 2)
        #expect(usage["total_tokens"] == 11)
        #expect(usage["input_tokens_details"]?["cached_tokens"] == 0)
        #expect(usage["output_tokens_details"]?["reasoning_tokens"] == 0)
        // No event ever carries a top-level "error" key with a value.
        #expect(events.allSatisfy { $0["error"] == nil || $0["error"] == .null || $0["type"] != "error" })
    }

    @Test func theResponseObjectHasEveryFieldOpenResponsesRequires() throws {
        var builder = try builder()
        _ = run([.textDelta("x"), .done(.stop)], builder: &builder)
        let object = try #require(builder.responseObject().objectValue)
        // The `required` list of ResponseResource in the pinned specification (Tests/schemas/openresponses.json); `user`
        // is not in it and is a non-null string in OpenAI's schema, so it is left out when the client sent none.
        let required = [
            "id", "object", "created_at", "completed_at", "status", "incomplete_details", "model", "previous_response_id",
            "instructions", "output", "error", "tools", "tool_choice", "truncation", "parallel_tool_calls", "text", "top_p",
            "presence_penalty", "frequency_penalty", "top_logprobs", "temperature", "reasoning", "usage",
            "max_output_tokens", "max_tool_calls", "store", "background", "service_tier", "metadata", "safety_identifier",
            "prompt_cache_key",
        ]
        for key in required { #expect(object[key] != nil, "missing \(key)") }
        #expect(object["user"] == nil)
    }

    @Test func hittingTheCapEndsIncomplete() throws {
        var builder = try builder()
        let events = run([.textDelta("a"), .done(.length)], builder: &builder)
        let last = try #require(events.last)
        #expect(last["type"] == "response.incomplete")
        #expect(last["response"]?["incomplete_details"]?["reason"] == "max_output_tokens")
        #expect(last["response"]?["output"]?[0]?["status"] == "incomplete")
    }

    @Test func aBackendErrorIsAnErrorEventThenResponseFailed() throws {
        var builder = try builder()
        let events = run([.textDelta("a"), .failed(.rateLimited, message: "slow down")], builder: &builder)
        let types = events.suffix(2).map { $0["type"]!.stringValue! }
        #expect(types == ["error", "response.failed"])
        let error = events[events.count - 2]
        #expect(error["code"] == "rate_limited")
        #expect(error["message"] == "slow down")
        #expect(error["error"] == nil)
        #expect(events.last?["response"]?["status"] == "failed")
        #expect(events.last?["response"]?["error"]?["code"] == "rate_limited")
    }

    @Test func functionCallsUseDistinctItemAndCallIDs() throws {
        var builder = try builder()
        let events = run(
            [
                .toolCallBegin(index: 0, name: "get_weather", callID: "call_abc"), .toolCallArguments(index: 0, delta: #"{"city":"#),
                .toolCallArguments(index: 0, delta: #""SF"}"#), .toolCallEnd(index: 0), .done(.toolCalls),
            ], builder: &builder)
        #expect(
            events.map { $0["type"]!.stringValue! } == [
                "response.created", "response.in_progress", "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
                "response.completed",
            ])
        let item = try #require(events[6]["item"])
        #expect(item["call_id"] == "call_abc")
        #expect(item["id"]?.stringValue?.hasPrefix("fc_") == true)
        #expect(item["arguments"] == #"{"city":"SF"}"#)
        #expect(events[3]["item_id"] == item["id"])
        #expect(events.last?["response"]?["status"] == "completed")
    }

    static let toolsBody =
        #"{"model":"m","input":"hi","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}}},{"type":"custom","name":"patch"}]}"#

    /// Backends end every open call when they stop, so a call the output cap cut arrives as TOOL_CALL_END, USAGE,
    /// DONE/length; without the END it is the same call, still open. Either way the item is `incomplete`, in the
    /// streamed `…done` events, in `response.incomplete` and in the non-streaming object.
    @Test(arguments: ["f", "patch"], [true, false])
    func aToolCallCutByTheCapIsIncomplete(tool: String, ended: Bool) throws {
        let cut: [BackendEvent] =
            [.toolCallBegin(index: 0, name: tool, callID: "call_1"), .toolCallArguments(index: 0, delta: #"{"input":"*** Be"#)]
            + (ended ? [.toolCallEnd(index: 0)] : []) + [.usage(BackendUsage(inputTokens: 3, outputTokens: 16)), .done(.length)]
        var streaming = try builder(Self.toolsBody, cap: 16)
        let events = run(cut, builder: &streaming)
        let kind = tool == "f" ? "function_call" : "custom_tool_call"
        let doneTypes =
            tool == "f"
            ? ["response.function_call_arguments.done", "response.output_item.done", "response.incomplete"]
            : ["response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done", "response.incomplete"]
        #expect(events.suffix(doneTypes.count).map { $0["type"]!.stringValue! } == doneTypes)
        let itemDone = try #require(events.last { $0["type"] == "response.output_item.done" })
        #expect(itemDone["item"]?["type"] == .string(kind))
        #expect(itemDone["item"]?["status"] == "incomplete")
        let final = try #require(events.last?["response"])
        #expect(final["status"] == "incomplete")
        #expect(final["incomplete_details"]?["reason"] == "max_output_tokens")
        #expect(final["output"]?[0]?["status"] == "incomplete")
        #expect(final["output"]?[0] == itemDone["item"])

        var plain = try builder(Self.toolsBody, cap: 16)
        plain.streamsEvents = false
        for event in cut { _ = plain.consume(event, now: 1_760_000_001) }
        var body: [UInt8] = []
        plain.encodeResponseObject(into: &body)
        let object = try JSONParser.parse(String(decoding: body, as: UTF8.self))
        #expect(object["status"] == "incomplete")
        #expect(object["output"]?[0]?["type"] == .string(kind))
        #expect(object["output"]?[0]?["status"] == "incomplete")
        #expect(body == plain.responseObject().encoded())
    }

    /// A call followed by more output was finished by the model: only the item the cap cut is `incomplete`.
    @Test func onlyTheItemTheCapCutIsIncomplete() throws {
        var builder = try builder(Self.toolsBody, cap: 2)
        let events = run(
            [
                .toolCallBegin(index: 0, name: "f", callID: "call_1"), .toolCallArguments(index: 0, delta: "{}"), .toolCallEnd(index: 0),
                .textDelta("a"), .textDelta("b"), .done(.length),
            ], builder: &builder)
        let output = try #require(events.last?["response"]?["output"]?.arrayValue)
        #expect(output.map { $0["status"] } == ["completed", "incomplete"])
        let itemsDone = events.filter { $0["type"] == "response.output_item.done" }.map { $0["item"]?["status"] }
        #expect(itemsDone == ["completed", "incomplete"])
    }

    /// With `parallel_tool_calls: false` a second call is dropped; a cap that cuts it leaves the kept call whole.
    @Test func aDroppedCallCutByTheCapLeavesTheKeptCallCompleted() throws {
        let body = Self.toolsBody.replacingOccurrences(of: #""input":"hi","#, with: #""input":"hi","parallel_tool_calls":false,"#)
        var builder = try builder(body, cap: 8)
        let events = run(
            [
                .toolCallBegin(index: 0, name: "f", callID: "call_1"), .toolCallArguments(index: 0, delta: "{}"), .toolCallEnd(index: 0),
                .toolCallBegin(index: 1, name: "f", callID: "call_2"), .toolCallArguments(index: 1, delta: "{"), .toolCallEnd(index: 1),
                .done(.length),
            ], builder: &builder)
        let final = try #require(events.last?["response"])
        #expect(final["status"] == "incomplete")
        #expect(final["output"]?.arrayValue?.map { $0["status"] } == ["completed"])
    }

    /// A failure after a call ended does not make that call incomplete; a call it interrupted is.
    @Test(arguments: [true, false])
    func aFailureMarksOnlyAnInterruptedCallIncomplete(ended: Bool) throws {
        var builder = try builder(Self.toolsBody)
        let events = run(
            [.toolCallBegin(index: 0, name: "f", callID: "call_1"), .toolCallArguments(index: 0, delta: "{}")] + (ended ? [.toolCallEnd(index: 0)] : [])
                + [.failed(.rateLimited, message: "slow down")], builder: &builder)
        #expect(events.suffix(4).map { $0["type"]!.stringValue! } == ["response.function_call_arguments.done", "response.output_item.done", "error", "response.failed"])
        #expect(events.last?["response"]?["output"]?[0]?["status"] == (ended ? "completed" : "incomplete"))
    }

    @Test func theOutputCapIsEchoed() throws {
        var builder = try builder(cap: 77)
        _ = run([.done(.stop)], builder: &builder)
        #expect(builder.responseObject()["max_output_tokens"] == 77)
    }

    /// Members a client sends as `null` mean "the default", as when absent; the response shows the default.
    @Test func nullRequestMembersGetTheirDefaults() throws {
        let body = #"{"model":"m","input":"hi","text":null,"metadata":null,"truncation":null,"reasoning":null,"tool_choice":null}"#
        var builder = try builder(body)
        builder.streamsEvents = false
        _ = builder.consume(.done(.stop), now: 1_760_000_001)
        let object = builder.responseObject()
        #expect(object["text"] == ["format": ["type": "text"], "verbosity": "medium"])
        #expect(object["metadata"] == [:])
        #expect(object["truncation"] == "disabled")
        #expect(object["reasoning"] == ["effort": nil, "summary": nil])
        #expect(object["tool_choice"] == "auto")
        var direct: [UInt8] = []
        builder.encodeResponseObject(into: &direct)
        #expect(try JSONParser.parse(String(decoding: direct, as: UTF8.self)) == object)
    }

    /// The bodies and event sequences whose response objects the direct encoder must reproduce byte for byte.
    static let encodingCases: [(body: String, events: [BackendEvent])] = [
        (#"{"model":"m","input":"hi"}"#, []),
        (#"{"model":"m","input":"hi"}"#, [.textDelta("Hel"), .textDelta("lo \"q\"\n"), .usage(BackendUsage(inputTokens: 9, outputTokens: 2)), .done(.stop)]),
        (#"{"model":"m","input":"hi","max_output_tokens":2}"#, [.textDelta("a"), .textDelta("b"), .textDelta("c")]),
        (#"{"model":"m","input":"hi"}"#, [.textDelta("x"), .failed(.rateLimited, message: "slow down")]),
        (#"{"model":"m","input":"hi","text":null,"metadata":null,"truncation":null,"user":null}"#, [.textDelta("x"), .done(.stop)]),
        (
            #"{"model":"m","input":"hi","instructions":"be brief","temperature":0.5,"top_p":0.25,"user":"u","metadata":{"k":"v"},"service_tier":null,"truncation":"auto","text":{"format":{"type":"text"}},"reasoning":null,"max_tool_calls":3,"prompt_cache_key":"c","safety_identifier":"s","parallel_tool_calls":false,"tool_choice":"required","tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}}}]}"#,
            [.toolCallBegin(index: 0, name: "f", callID: "call_1"), .toolCallArguments(index: 0, delta: "{}"), .toolCallEnd(index: 0), .done(.toolCalls)]
        ),
        (
            ResponseBuilderTests.toolsBody,
            [.toolCallBegin(index: 0, name: "f", callID: "call_1"), .toolCallArguments(index: 0, delta: #"{"a"#), .toolCallEnd(index: 0), .done(.length)]
        ),
        (ResponseBuilderTests.toolsBody, [.toolCallBegin(index: 0, name: "patch", callID: "call_2"), .toolCallArguments(index: 0, delta: #"{"input":"x"#), .done(.length)]),
        (
            ResponseBuilderTests.toolsBody,
            [.textDelta("Let me check \u{1F600}."), .toolCallBegin(index: 0, name: "f", callID: "call_3"), .toolCallArguments(index: 0, delta: "{}"), .toolCallEnd(index: 0), .done(.toolCalls)]
        ),
    ]

    @Test(arguments: 0..<ResponseBuilderTests.encodingCases.count)
    func theDirectEncodingIsTheResponseObjectsEncoding(case index: Int) throws {
        let (body, events) = Self.encodingCases[index]
        var builder = try builder(body)
        builder.streamsEvents = false
        for event in events { _ = builder.consume(event, now: 1_760_000_001) }
        var direct: [UInt8] = []
        builder.encodeResponseObject(into: &direct)
        #expect(String(decoding: direct, as: UTF8.self) == String(decoding: builder.responseObject().encoded(), as: UTF8.self))
    }

    /// A stop sequence that cuts a structured answer fails it once: the dialects' streams end exactly once (the
    /// failure recorded its end, and the stop recorded a second one: two error chunks and two `[DONE]`).
    @Test func aStopThatFailsAStructuredAnswerEndsTheStepsOnce() throws {
        let request = PipelineRequest(
            dialect: .chatCompletions, model: "m", system: [], items: [.message(role: "user", parts: [["type": "text", "text": "x"]])],
            stream: true, stopSequences: ["}"], outputFormat: .jsonObject(param: "response_format"))
        var builder = ResponseBuilder(
            responseID: "chatcmpl-1", request: request, model: "m", maxOutputTokens: 100, estimatedInputTokens: 3, createdAt: 1_760_000_000)
        builder.streamsEvents = false
        builder.recordsSteps = true
        _ = builder.start()
        var steps: [ResponseBuilder.Step] = []
        _ = builder.consume(.textDelta(#"{"a":"x}y"}"#), now: 1_760_000_001)
        steps += builder.takeSteps()
        _ = builder.consume(.done(.cancelled), now: 1_760_000_002)
        steps += builder.takeSteps()
        #expect(steps.filter { $0 == .ended }.count == 1, "\(steps)")
        #expect(steps.last == .ended)
        guard case .failed(let error)? = builder.outcome else {
            Issue.record("the cut structured answer did not fail: \(String(describing: builder.outcome))")
            return
        }
        #expect(error.code == .invalidStructuredOutput)
    }
}

/// The host's check of structured answers (`text.format`) before `completed`.
@Suite struct StructuredAnswerBuilderTests {
    static let body = #"""
        {"model":"m","input":"hi","text":{"format":{"type":"json_schema","name":"P","schema":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}}}}
        """#

    func builder(_ body: String = body) throws -> ResponseBuilder {
        ResponseBuilder(
            responseID: "resp_1", request: try ResponsesRequest(body: Array(body.utf8)), model: "m", maxOutputTokens: 100,
            estimatedInputTokens: 3, createdAt: 1_760_000_000)
    }

    func finish(_ deltas: [String], _ reason: FinishReason = .stop, body: String = body) throws -> ResponseBuilder {
        var builder = try builder(body)
        _ = builder.start()
        for delta in deltas { _ = builder.consume(.textDelta(delta), now: 1) }
        _ = builder.consume(.done(reason), now: 2)
        return builder
    }

    @Test func aMatchingAnswerCompletes() throws {
        #expect(try finish([#"{"a""#, #":1}"#]).outcome == .completed)
    }

    @Test func aBrokenOrMismatchedAnswerFails() throws {
        for deltas in [[#"{"a":"#], [#"{"a":"one"}"#], [#"{}"#], ["Sure: ", #"{"a":1}"#]] {
            let builder = try finish(deltas)
            guard case .failed(let error)? = builder.outcome else {
                Issue.record("\(deltas) → \(String(describing: builder.outcome))")
                continue
            }
            #expect(error.publicCode == "invalid_structured_output")
            #expect(error.httpStatus == 500)
            #expect(builder.responseObject()["error"]?["code"] == "invalid_structured_output")
        }
    }

    @Test func aCutAnswerIsIncomplete() throws {
        #expect(try finish([#"{"a"#], .length).outcome == .incomplete(reason: "max_output_tokens"))
    }

    @Test func jsonObjectNeedsAnObjectAndTextNeedsNothing() throws {
        let object = #"{"model":"m","input":"hi","text":{"format":{"type":"json_object"}}}"#
        #expect(try finish([#"{"x":[1]}"#], body: object).outcome == .completed)
        #expect(try finish(["[1]"], body: object).outcome != .completed)
        #expect(try finish(["not json"], body: #"{"model":"m","input":"hi"}"#).outcome == .completed)
    }

    /// A turn that only calls tools has no answer to check.
    @Test func aToolCallTurnIsNotChecked() throws {
        let body = #"""
            {"model":"m","input":"hi","text":{"format":{"type":"json_object"}},
             "tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{}}}]}
            """#
        var builder = try builder(body)
        _ = builder.start()
        _ = builder.consume(.toolCallBegin(index: 0, name: "f", callID: "c"), now: 1)
        _ = builder.consume(.toolCallArguments(index: 0, delta: "{}"), now: 1)
        _ = builder.consume(.toolCallEnd(index: 0), now: 1)
        _ = builder.consume(.done(.toolCalls), now: 2)
        #expect(builder.outcome == .completed)
    }
}
