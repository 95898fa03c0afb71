// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// `text.format` json_schema / json_object end to end through a real afmd and the real scripted backend: the
/// schema reaches the backend normalized, the host checks every answer before `completed`, models without the
/// `structured_output` capability are refused.
@Suite struct StructuredOutputTests {
    /// A Pydantic model as `to_strict_json_schema` sends it: $defs, $ref, an enum, a Literal, an Optional, a
    /// list of models, every property required, additionalProperties false everywhere.
    static let citySchema = #"""
        {"$defs":{"Kind":{"enum":["capital","town"],"title":"Kind","type":"string"},
          "Street":{"properties":{"name":{"title":"Name","type":"string"},"length_km":{"title":"Length Km","type":"number","minimum":0}},
                    "required":["name","length_km"],"title":"Street","type":"object","additionalProperties":false}},
         "properties":{"reasoning":{"title":"Reasoning","type":"string"},
                       "name":{"title":"Name","type":"string"},
                       "kind":{"$ref":"#/$defs/Kind"},
                       "size":{"enum":["small","large"],"title":"Size","type":"string"},
                       "mayor":{"anyOf":[{"type":"string"},{"type":"null"}],"title":"Mayor"},
                       "population":{"default":0,"title":"Population","type":"integer"},
                       "streets":{"items":{"$ref":"#/$defs/Street"},"title":"Streets","type":"array","maxItems":3}},
         "required":["reasoning","name","kind","size","mayor","population","streets"],
         "title":"City","type":"object","additionalProperties":false}
        """#

    static func format(_ schema: String = citySchema, strict: Bool = true) -> String {
        #","text":{"format":{"type":"json_schema","name":"City","strict":\#(strict),"schema":\#(schema)}}"#
    }

    static let validCity =
        #"{"reasoning":"It is big.","name":"Paris","kind":"capital","size":"large","mayor":null,"population":2100000,"streets":[{"name":"Rivoli","length_km":3}]}"#

    static func jsonStep(_ text: String, chunks: Int = 4) -> String {
        let escaped = JSONValue.string(text).jsonString
        return #"[{"json":{"text":\#(escaped),"chunks":\#(chunks)}}]"#
    }

    func generateRequests(_ harness: DaemonHarness) -> [JSONValue] {
        harness.records().filter { $0["event"] == "generate" }.compactMap { $0["request"] }
    }

    @Test func aValidAnswerCompletesAndTheBackendGetsTheNormalizedSchema() throws {
        let harness = try DaemonHarness(models: ["json": Self.jsonStep(Self.validCity)])
        let response = try harness.client().post(
            "/v1/responses", json: responsesBody(model: "json", input: "Describe Paris", extra: Self.format()))
        #expect(response.status == 200, "\(response)")
        let body = try #require(response.json)
        #expect(body["status"] == "completed")
        #expect(body["output"]?[0]?["content"]?[0]?["text"] == .string(Self.validCity))
        // The format is echoed as sent.
        #expect(body["text"]?["format"]?["type"] == "json_schema")
        #expect(body["text"]?["format"]?["name"] == "City")
        #expect(body["text"]?["format"]?["strict"] == true)
        #expect(body["text"]?["format"]?["schema"]?["title"] == "City")

        // The scripted backend recorded the document: output_format with the normalized schema, in schema order.
        let sent = try #require(generateRequests(harness).last)
        let format = try #require(sent["output_format"])
        #expect(format["type"] == "json_schema")
        #expect(format["name"] == "City")
        #expect(format["strict"] == true)
        let properties = try #require(format["schema"]?["properties"]?.objectValue)
        #expect(properties.keys == ["reasoning", "name", "kind", "size", "mayor", "population", "streets"])
        #expect(format["schema"]?["$defs"]?["Street"]?["additionalProperties"] == false)
        // An unenforced keyword would have become description text; none here, so no warning header.
        #expect(!response.headers.contains { $0.name.lowercased() == "x-afm-warning" })
    }

    @Test func theStreamedAnswerConcatenatesToTheCheckedText() throws {
        let harness = try DaemonHarness(models: ["json": Self.jsonStep(Self.validCity, chunks: 7)])
        let response = try harness.client().post(
            "/v1/responses", json: responsesBody(model: "json", stream: true, extra: Self.format()))
        #expect(response.status == 200)
        let deltas = response.events.filter { $0.event == "response.output_text.delta" }.compactMap { $0.data["delta"]?.stringValue }
        #expect(deltas.count == 7)
        #expect(deltas.joined() == Self.validCity)
        #expect(response.events.last?.event == "response.completed")
        #expect(response.events.last?.data["response"]?["text"]?["format"]?["name"] == "City")
    }

    /// The host's check: JSON that does not parse, or does not match, is never `completed`.
    @Test(arguments: [
        (#"{"reasoning":"x","name":"Paris""#, "not JSON"),
        (#"{"reasoning":"x","name":"Paris","kind":"village","size":"large","mayor":null,"population":1,"streets":[]}"#, "$.kind"),
        (#"{"reasoning":"x","name":"Paris","kind":"town","size":"large","mayor":null,"population":1.5,"streets":[]}"#, "$.population"),
        (#"{"reasoning":"x","name":"Paris","kind":"town","size":"large","mayor":null,"population":1,"streets":[{"name":"a","length_km":-1}]}"#, "$.streets[0].length_km"),
        (#"{"reasoning":"x","name":"Paris","kind":"town","size":"large","population":1,"streets":[]}"#, "mayor"),
        (#"{"reasoning":"x","name":"Paris","kind":"town","size":"large","mayor":null,"population":1,"streets":[],"extra":1}"#, "$.extra"),
        (#"Sure! Here is the JSON: {}"#, "not JSON"),
    ])
    func invalidJSONFromTheBackendFailsTheResponse(_ testCase: (answer: String, fragment: String)) throws {
        let harness = try DaemonHarness(models: ["bad": Self.jsonStep(testCase.answer)])
        let plain = try harness.client().post("/v1/responses", json: responsesBody(model: "bad", extra: Self.format()))
        #expect(plain.status == 500, "\(plain)")
        #expect(plain.json?["error"]?["code"] == "invalid_structured_output")
        #expect(plain.json?["error"]?["type"] == "server_error")
        let message = plain.json?["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains(testCase.fragment), "\(message)")

        let streamed = try harness.client().post(
            "/v1/responses", json: responsesBody(model: "bad", stream: true, extra: Self.format()))
        let types = streamed.events.map(\.event)
        #expect(types.last == "response.failed", "\(types)")
        #expect(!types.contains("response.completed"))
        let error = streamed.events.first { $0.event == "error" }?.data
        #expect(error?["code"] == "invalid_structured_output")
        #expect(streamed.events.last?.data["response"]?["error"]?["code"] == "invalid_structured_output")
    }

    @Test func anAnswerCutByMaxOutputTokensIsIncompleteNeverCompleted() throws {
        let harness = try DaemonHarness(models: ["long": Self.jsonStep(Self.validCity, chunks: 10)])
        let response = try harness.client().post(
            "/v1/responses", json: responsesBody(model: "long", extra: #","max_output_tokens":4"# + Self.format()))
        #expect(response.status == 200)
        #expect(response.json?["status"] == "incomplete")
        #expect(response.json?["incomplete_details"]?["reason"] == "max_output_tokens")
    }

    @Test func jsonObjectModeAcceptsAnyObjectAndRefusesAnythingElse() throws {
        let harness = try DaemonHarness(models: [
            "object": Self.jsonStep(#"{"anything": [1, 2, {"goes": true}]}"#),
            "array": Self.jsonStep("[1, 2]"),
        ])
        let format = #","text":{"format":{"type":"json_object"}}"#
        let good = try harness.client().post("/v1/responses", json: responsesBody(model: "object", extra: format))
        #expect(good.status == 200, "\(good)")
        #expect(good.json?["status"] == "completed")
        #expect(good.json?["text"]?["format"] == ["type": "json_object"])
        #expect(generateRequests(harness).last?["output_format"] == ["type": "json_object"])
        let bad = try harness.client().post("/v1/responses", json: responsesBody(model: "array", extra: format))
        #expect(bad.status == 500)
        #expect(bad.json?["error"]?["code"] == "invalid_structured_output")
    }

    @Test func plainRequestsTellTheBackendText() throws {
        let harness = try DaemonHarness(models: ["plain": #"[{"text":"hi"}]"#])
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "plain"))
        #expect(response.json?["status"] == "completed")
        #expect(generateRequests(harness).last?["output_format"] == ["type": "text"])
        #expect(response.json?["text"]?["format"] == ["type": "text"])
    }

    @Test func unenforcedKeywordsBecomeDescriptionAndAWarningHeader() throws {
        let harness = try DaemonHarness(models: ["json": Self.jsonStep(#"{"code":"AB12"}"#)])
        let schema = #"{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}[0-9]{2}$","description":"A code"}},"required":["code"]}"#
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "json", extra: Self.format(schema)))
        #expect(response.status == 200, "\(response)")
        let warnings = response.headers.filter { $0.name.lowercased() == "x-afm-warning" }.map(\.value)
        #expect(warnings.contains { $0.contains("text.format.schema.properties.code.pattern") }, "\(warnings)")
        let sent = try #require(generateRequests(harness).last?["output_format"]?["schema"])
        #expect(sent["properties"]?["code"]?["description"] == "A code (pattern: ^[A-Z]{2}[0-9]{2}$)")
        #expect(sent["properties"]?["code"]?["pattern"] == nil)
    }

    @Test func aModelWithoutTheCapabilityIsRefusedNotEmulated() throws {
        let harness = try DaemonHarness(models: [
            "nojson": #"{"capabilities":{"streaming":true,"tools":true,"structured_output":false},"steps":[{"text":"{}"}]}"#
        ])
        for format in [Self.format(), #","text":{"format":{"type":"json_object"}}"#] {
            let response = try harness.client().post("/v1/responses", json: responsesBody(model: "nojson", extra: format))
            #expect(response.status == 400)
            #expect(response.json?["error"]?["code"] == "unsupported_capability")
            #expect(response.json?["error"]?["param"] == "text.format")
        }
        #expect(generateRequests(harness).isEmpty)
    }

    /// A backend built against ABI 1.0 never read `output_format`: its models lack the capability even when its
    /// describe document claims it, and it still loads and serves plain requests.
    @Test(arguments: [["FIXTURE_ABI_MINOR=0"], ["FIXTURE_ABI_MINOR=0", "FIXTURE_CLAIMS_STRUCTURED_OUTPUT"]], ["in-process", "runner"])
    func anABI10BackendLoadsButHasNoStructuredOutput(_ defines: [String], hosting: String) throws {
        let directory = BackendDirectoryBuilder()
        try directory.addCFixture(defines: defines, hosting: hosting)
        let daemon = try DaemonProcess(backendDirectory: directory.path, config: "")
        let client = try TestHTTPClient(port: daemon.port)
        let plain = try client.post("/v1/responses", json: responsesBody(model: "c-echo", input: "still here"))
        #expect(plain.status == 200, "\(plain)")
        #expect(plain.json?["output"]?[0]?["content"]?[0]?["text"] == "still here")
        let models = try TestHTTPClient(port: daemon.port).get("/v1/models")
        let echo = models.json?["data"]?.arrayValue?.first { $0["id"] == "c-echo" }
        #expect(echo?["capabilities"]?["structured_output"] == false, "\(String(describing: echo))")
        let structured = try TestHTTPClient(port: daemon.port).post(
            "/v1/responses", json: responsesBody(model: "c-echo", extra: #","text":{"format":{"type":"json_object"}}"#))
        #expect(structured.status == 400)
        #expect(structured.json?["error"]?["code"] == "unsupported_capability")
    }

    /// The same claim from a 1.1 backend is believed (what the 1.0 test above refuses is the minor, not the claim).
    @Test func anABI11BackendsClaimIsBelieved() throws {
        let directory = BackendDirectoryBuilder()
        try directory.addCFixture(defines: ["FIXTURE_CLAIMS_STRUCTURED_OUTPUT"])
        let daemon = try DaemonProcess(backendDirectory: directory.path, config: "")
        let models = try TestHTTPClient(port: daemon.port).get("/v1/models")
        let echo = models.json?["data"]?.arrayValue?.first { $0["id"] == "c-echo" }
        #expect(echo?["capabilities"]?["structured_output"] == true, "\(String(describing: echo))")
        // c-echo answers with the input, which is not JSON: the host fails it rather than completing it.
        let response = try TestHTTPClient(port: daemon.port).post(
            "/v1/responses", json: responsesBody(model: "c-echo", input: "not json", extra: #","text":{"format":{"type":"json_object"}}"#))
        #expect(response.status == 500)
        #expect(response.json?["error"]?["code"] == "invalid_structured_output")
    }

    /// Tool-call arguments are checked against the tool's parameter schema like a structured answer, number bounds
    /// included (the local backend's grammar does not enforce a tool's `number` bounds, and other backends enforce
    /// nothing): a call outside the schema fails the response with `invalid_structured_output` naming the argument,
    /// in every dialect; a call inside it is delivered. Such calls were delivered as they came.
    @Test func toolCallArgumentsAreCheckedAgainstTheToolsSchema() throws {
        let parameters = #"{"type":"object","properties":{"score":{"type":"number","minimum":0,"maximum":10},"label":{"type":"string","maxLength":5}},"required":["score"]}"#
        func call(_ arguments: String) -> String {
            #"[{"tool_call":{"name":"rate","call_id":"call_1","arguments":\#(JSONValue.string(arguments).jsonString),"chunks":2}},{"finish":"tool_calls"}]"#
        }
        let harness = try DaemonHarness(models: [
            "high": call(#"{"score":250}"#), "long": call(#"{"score":1,"label":"too long"}"#), "good": call(#"{"score":9.5,"label":"ok"}"#),
            "huge": call(#"{"score":10.000000000000000001}"#),
        ])
        let tools = #","tools":[{"type":"function","name":"rate","parameters":\#(parameters)}]"#
        for (model, fragment) in [("high", "$.score"), ("long", "$.label"), ("huge", "$.score")] {
            let plain = try harness.client().post("/v1/responses", json: responsesBody(model: model, extra: tools))
            #expect(plain.status == 500, "\(model): \(plain)")
            #expect(plain.json?["error"]?["code"] == "invalid_structured_output", "\(model): \(plain)")
            let message = plain.json?["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains("rate") && message.contains(fragment), "\(model): \(message)")
            let streamed = try harness.client().post("/v1/responses", json: responsesBody(model: model, stream: true, extra: tools))
            #expect(streamed.events.last?.event == "response.failed", "\(model): \(streamed.events.map(\.event))")
            #expect(streamed.events.first { $0.event == "error" }?.data["code"] == "invalid_structured_output")
        }
        let good = try harness.client().post("/v1/responses", json: responsesBody(model: "good", extra: tools))
        #expect(good.status == 200, "\(good)")
        #expect(good.json?["status"] == "completed")
        #expect(good.json?["output"]?[0]?["arguments"] == #"{"score":9.5,"label":"ok"}"#)

        // The other dialects: the same check, in their envelopes.
        let chatTools = #""tools":[{"type":"function","function":{"name":"rate","parameters":\#(parameters)}}]"#
        let chat = try harness.client().post(
            "/v1/chat/completions", json: #"{"model":"high","messages":[{"role":"user","content":"x"}],\#(chatTools)}"#)
        #expect(chat.status == 500, "\(chat)")
        #expect(chat.json?["error"]?["code"] == "invalid_structured_output", "\(chat)")
        let messages = try harness.client().post(
            "/v1/messages",
            json: #"{"model":"high","max_tokens":16,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"rate","input_schema":\#(parameters)}]}"#)
        #expect(messages.status == 500, "\(messages)")
        #expect(messages.json?["error"]?["type"] == "api_error", "\(messages)")
        #expect(messages.json?["error"]?["message"]?.stringValue?.contains("$.score") == true, "\(messages)")
        let chatGood = try harness.client().post(
            "/v1/chat/completions", json: #"{"model":"good","messages":[{"role":"user","content":"x"}],\#(chatTools)}"#)
        #expect(chatGood.status == 200, "\(chatGood)")
        #expect(chatGood.json?["choices"]?[0]?["finish_reason"] == "tool_calls")
    }

    /// A model's call of a tool the request does not offer is delivered as written, in every dialect: the client's
    /// runtime answers it (AFMAgent with an "unknown tool" output, LangGraph's ToolNode with an error message).
    /// Failing the response instead (6fb1c55, reverted) made AFMAgent's turn fail where it recovers.
    @Test func aCallOfAToolTheRequestDoesNotOfferIsDelivered() throws {
        let harness = try DaemonHarness(models: [
            "stray": #"[{"tool_call":{"name":"drop_tables","call_id":"call_1","arguments":"{}"}},{"finish":"tool_calls"}]"#
        ])
        let parameters = #"{"type":"object","properties":{"score":{"type":"number"}}}"#
        let plain = try harness.client().post(
            "/v1/responses", json: responsesBody(model: "stray", extra: #","tools":[{"type":"function","name":"rate","parameters":\#(parameters)}]"#))
        #expect(plain.status == 200, "\(plain)")
        #expect(plain.json?["status"] == "completed", "\(plain)")
        #expect(plain.json?["output"]?[0]?["name"] == "drop_tables", "\(plain)")
        let chat = try harness.client().post(
            "/v1/chat/completions",
            json: #"{"model":"stray","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"rate","parameters":\#(parameters)}}]}"#)
        #expect(chat.status == 200, "\(chat)")
        #expect(chat.json?["choices"]?[0]?["message"]?["tool_calls"]?[0]?["function"]?["name"] == "drop_tables", "\(chat)")
        let messages = try harness.client().post(
            "/v1/messages",
            json: #"{"model":"stray","max_tokens":16,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"rate","input_schema":\#(parameters)}]}"#)
        #expect(messages.status == 200, "\(messages)")
        #expect(messages.json?["content"]?[0]?["name"] == "drop_tables", "\(messages)")
    }

    /// A call of a tool the request does not offer is delivered, but its arguments must still be a JSON object, as
    /// for an offered tool: arguments that are not JSON, or JSON that is not an object, fail the response with
    /// `invalid_structured_output` in every dialect. Failed before: they were delivered unchecked (Messages sent
    /// `input: {}` in place of an array, and a stream's `partial_json` that was not JSON at all).
    @Test func aCallOfAToolTheRequestDoesNotOfferStillNeedsObjectArguments() throws {
        func stray(_ arguments: String) -> String {
            #"[{"tool_call":{"name":"drop_tables","call_id":"call_1","arguments":\#(JSONValue.string(arguments).jsonString)}},{"finish":"tool_calls"}]"#
        }
        let harness = try DaemonHarness(models: ["array": stray("[1,2]"), "text": stray("not json"), "number": stray("42")])
        let parameters = #"{"type":"object","properties":{"score":{"type":"number"}}}"#
        let tools = #","tools":[{"type":"function","name":"rate","parameters":\#(parameters)}]"#
        for model in ["array", "text", "number"] {
            let plain = try harness.client().post("/v1/responses", json: responsesBody(model: model, extra: tools))
            #expect(plain.status == 500, "\(model): \(plain)")
            #expect(plain.json?["error"]?["code"] == "invalid_structured_output", "\(model): \(plain)")
            #expect(plain.json?["error"]?["message"]?.stringValue?.contains("drop_tables") == true, "\(model): \(plain)")
            let streamed = try harness.client().post("/v1/responses", json: responsesBody(model: model, stream: true, extra: tools))
            #expect(streamed.events.last?.event == "response.failed", "\(model): \(streamed.events.map(\.event))")
            #expect(streamed.events.first { $0.event == "error" }?.data["code"] == "invalid_structured_output")
            let chat = try harness.client().post(
                "/v1/chat/completions",
                json: #"{"model":"\#(model)","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"rate","parameters":\#(parameters)}}]}"#)
            #expect(chat.status == 500, "\(model): \(chat)")
            #expect(chat.json?["error"]?["code"] == "invalid_structured_output", "\(model): \(chat)")
            let messagesBody = #"{"model":"\#(model)","max_tokens":16,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"rate","input_schema":\#(parameters)}]"#
            let messages = try harness.client().post("/v1/messages", json: messagesBody + "}")
            #expect(messages.status == 500, "\(model): \(messages)")
            #expect(messages.json?["error"]?["message"]?.stringValue?.contains("drop_tables") == true, "\(model): \(messages)")
            let messagesStreamed = try harness.client().post("/v1/messages", json: messagesBody + #","stream":true}"#)
            let events = TestHTTPClient.parseEvents(messagesStreamed.text)
            #expect(events.last?.event == "error", "\(model): \(events.map(\.event))")
            #expect(!events.contains { $0.event == "message_stop" }, "\(model): \(events.map(\.event))")
        }
    }
}
