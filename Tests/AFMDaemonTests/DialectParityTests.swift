// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The three dialects are one pipeline: the same conversation reaches the backend as the same generation request,
/// and hostile bodies get a 4xx in each dialect's envelope naming the field, never a 5xx.
@Suite struct DialectParityTests {
    /// One conversation with a system text, a tool, a call and its output, in each dialect.
    static let responses = #"{"model":"demo","instructions":"Be brief.","max_output_tokens":40,"temperature":0.5,"tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}"},{"type":"function_call_output","call_id":"call_1","output":"sunny"},{"role":"user","content":"Thanks. And tomorrow?"}]}"#
    static let chat = #"{"model":"demo","max_completion_tokens":40,"temperature":0.5,"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"},{"role":"user","content":"Thanks. And tomorrow?"}]}"#
    static let messages = #"{"model":"demo","system":"Be brief.","max_tokens":40,"temperature":0.5,"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],"messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":[{"type":"tool_use","id":"call_1","name":"get_weather","input":{"city":"Paris"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"call_1","content":"sunny"},{"type":"text","text":"Thanks. And tomorrow?"}]}]}"#

    @Test func theSameConversationMakesTheSameGenerationRequest() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"Sunny again."}]"#])
        for (path, body) in [("/v1/responses", Self.responses), ("/v1/chat/completions", Self.chat), ("/v1/messages", Self.messages)] {
            let response = try harness.client().post(path, json: body)
            #expect(response.status == 200, "\(path): \(response.text)")
        }
        let requests = harness.records().filter { $0["event"] == "generate" }.compactMap { record -> JSONValue? in
            // The response id differs by design (resp_, chatcmpl-, msg_): everything else must be equal.
            guard var request = record["request"]?.objectValue else { return nil }
            #expect(request.removeValue(forKey: "response_id") != nil)
            return .object(request)
        }
        #expect(requests.count == 3)
        #expect(requests[0] == requests[1], "Responses vs Chat Completions")
        #expect(requests[0] == requests[2], "Responses vs Messages")
        let statusBody = try #require(try harness.client().get("/status").json)
        let byDialect = statusBody["tokens"]?["requests_by_dialect"]
        #expect(byDialect == ["responses": 1, "chat_completions": 1, "messages": 1], "\(statusBody)")
        // afmctl top shows the same counts (its --json lines are the monitor's snapshots).
        let top = Process()
        top.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        top.arguments = ["--socket", harness.daemon.adminSocket, "--json", "top", "--interval", "200"]
        let pipe = Pipe()
        top.standardOutput = pipe
        try top.run()
        let line = try #require(String(decoding: pipe.fileHandleForReading.availableDataLine(), as: UTF8.self).split(separator: "\n").first)
        #expect(top.terminateGracefully(within: 2))
        let snapshot = try JSONParser.parse(String(line))
        #expect(snapshot["totals"]?["requests_by_dialect"] == ["responses": 1, "chat_completions": 1, "messages": 1])
        #expect(Set(snapshot["requests"]?.arrayValue?.compactMap { $0["dialect"]?.stringValue } ?? []) == ["responses", "chat_completions", "messages"])
    }

    /// Chat Completions' `seed` and Messages' `top_k` reach the backend; absent, the document has neither.
    @Test func seedAndTopKReachTheBackendOnlyWhenGiven() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"a"},{"text":"b"},{"text":"c"}]"#])
        let bodies = [
            ("/v1/chat/completions", #"{"model":"demo","seed":42,"messages":[{"role":"user","content":"x"}]}"#),
            ("/v1/messages", #"{"model":"demo","max_tokens":8,"top_k":5,"messages":[{"role":"user","content":"x"}]}"#),
            ("/v1/responses", #"{"model":"demo","input":"x"}"#),
        ]
        for (path, body) in bodies {
            let response = try harness.client().post(path, json: body)
            #expect(response.status == 200, "\(path): \(response.text)")
        }
        let requests = harness.records().filter { $0["event"] == "generate" }.compactMap { $0["request"] }
        #expect(requests.count == 3)
        #expect(requests.first?["seed"] == 42 && requests.first?["top_k"] == nil)
        #expect(requests.dropFirst().first?["top_k"] == 5 && requests.dropFirst().first?["seed"] == nil)
        #expect(requests.last?["seed"] == nil && requests.last?["top_k"] == nil)
    }

    /// Bodies that are wrong in one field each, with the field's name: (body, field).
    static func hostile(valid: JSONObject, fields: [(String, [JSONValue])]) -> [(String, String)] {
        var cases: [(String, String)] = []
        for (field, values) in fields {
            for value in values {
                var body = valid
                body[field] = value
                cases.append((JSONValue.object(body).jsonString, field))
            }
        }
        return cases
    }

    static let wrong: [JSONValue] = [1, "s", [], [:], true, -3.5]

    static func chatCases() throws -> [(String, String)] {
        let valid = try #require(JSONParser.parse(Self.chat).objectValue)
        var cases = hostile(
            valid: valid,
            fields: [
                ("model", [1, "", [], [:], true, .null]), ("messages", [1, "s", [], [:], true, [1], [["role": "robot", "content": "x"]]]),
                ("messages", [[["role": "user"]], [["role": "tool", "content": "x"]], [["role": "assistant", "content": .null]]]),
                ("stream", [1, "s", [], [:]]), ("stream_options", [1, "s", [], ["include_usage": 1], ["other": true]]),
                ("max_completion_tokens", [0, -1, 2.5, "s", []]), ("max_tokens", [0, -5, "s", [:]]),
                ("temperature", [-0.1, 2.5, "s", [], true]), ("top_p", [1.5, -1, "s", [:]]),
                ("stop", [1, "", [1], ["a", "b", "c", "d", "e"], [""], [:]]), ("tools", [1, "s", [:], [1], [["type": "web_search"]], [["type": "function"]]]),
                ("tool_choice", [1, "sometimes", [:], ["type": "function"], ["type": "function", "function": ["name": "nope"]]]),
                ("parallel_tool_calls", [1, "s", []]), ("response_format", [1, "s", [:], ["type": "xml"]]),
                ("reasoning_effort", [1, "extreme", [], "low"]), ("n", [2, 0, "s"]), ("seed", ["s", 1.5, []]),
                ("presence_penalty", [3, "s"]), ("frequency_penalty", [-3, []]), ("user", [1, []]), ("metadata", [1, "s"]),
                ("store", [true, "s"]), ("modalities", [["audio"], 1]), ("logprobs", [true, 1]), ("top_logprobs", [3]),
                ("logit_bias", [["1": 2]]), ("audio", [["voice": "x"]]), ("prediction", [["type": "content"]]), ("functions", [[]]),
                ("function_call", ["auto"]), ("web_search_options", [[:]]), ("unknown_field", [1, "s"]), ("temperatur", [1]),
            ])
        var messages = valid["messages"]?.arrayValue ?? []
        messages[3] = ["role": "tool", "tool_call_id": "call_zzz", "content": "sunny"]
        var orphan = valid
        orphan["messages"] = .array(messages)
        cases.append((JSONValue.object(orphan).jsonString, "messages"))
        for body in ["", "[]", "{", #"{"model":"demo""#, "null", #"{"model":"demo","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://x/y.png"}}]}]}"#] {
            cases.append((body, body.contains("image_url") ? "messages" : ""))
        }
        return cases
    }

    static func messagesCases() throws -> [(String, String)] {
        let valid = try #require(JSONParser.parse(Self.messages).objectValue)
        var cases = hostile(
            valid: valid,
            fields: [
                ("model", [1, "", [], [:], true, .null]), ("messages", [1, "s", [], [:], true, [1], [["role": "system", "content": "x"]]]),
                ("max_tokens", [0, -1, 2.5, "s", [], .null, "5", 1e20]), ("system", [1, [:], [1], [["type": "image"]], ["s"], [["type": "text"]]]),
                (
                    "messages",
                    [
                        [["role": "user"]], [["role": "user", "content": 1]], [["role": "user", "content": [1]]],
                        [["role": "user", "content": [["type": "text"]]]],
                        [["role": "user", "content": [["type": "image", "source": ["type": "base64", "media_type": "text/plain", "data": "x"]]]]],
                        [["role": "user", "content": [["type": "image", "source": ["type": "base64", "media_type": "image/png", "data": "!!!"]]]]],
                        [["role": "assistant", "content": [["type": "tool_use", "id": "a", "name": "b", "input": "x"]]]],
                        [["role": "user", "content": [["type": "tool_result", "content": "x"]]]], [["role": "user", "content": [["type": "video"]]]],
                        [["role": 1, "content": "x"]],
                    ]
                ),
                ("stream", [1, "s", [], [:]]), ("stop_sequences", ["s", 1, [1], [""], [:], ["a", 1]]),
                ("temperature", [-0.1, 1.5, "s", [], true, 1.01, "1"]), ("top_p", [1.5, -1, "s", [:]]), ("top_k", [0, -1, "s", 1.5]),
                (
                    "tools",
                    [
                        1, "s", [:], [1], [["name": "x"]], [["name": "bad name!", "input_schema": ["type": "object"]]],
                        [["name": "x", "input_schema": "s"]], [["name": "x", "input_schema": ["type": "object", "properties": 1]]],
                    ]
                ),
                ("tool_choice", [1, "auto", [:], ["type": "sometimes"], ["type": "tool"], ["type": "tool", "name": "nope"], ["type": "auto", "disable_parallel_tool_use": 1]]),
                ("thinking", [1, "on", [:], ["type": "enabled"], ["type": "enabled", "budget_tokens": 0], ["type": "maybe"], ["type": "enabled", "budget_tokens": "x"], ["type": "enabled", "budget_tokens": 2048]]),
                ("metadata", [1, "s", ["user_id": 1]]), ("container", ["c"]), ("mcp_servers", [[["url": "x"]]]),
                ("output_config", [1, ["effort": "extreme"], ["format": 1], ["format": ["type": "text"]], ["format": ["type": "json_schema"]], ["colour": 1]]),
                ("output_format", [["type": "json_schema"], ["type": "json_schema", "schema": ["type": "object", "properties": ["a": ["type": "array"]]]]]),
                ("unknown_field", [1, "s"]), ("max_token", [1]), ("stop", ["x"]), ("n", [1]),
            ])
        for body in ["", "[]", "{", #"{"model":"demo""#, "null",
            #"{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"http://x/y.png"}}]}]}"#,
            #"{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"a","name":"b","input":{}}]}]}"#,
            #"{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":[{"type":"document","source":{}}]}]}"#]
        {
            cases.append((body, body.contains("messages") ? "messages" : ""))
        }
        return cases
    }

    @Test func hostileChatCompletionsRequestsGetOpenAIErrors() throws {
        let cases = try Self.chatCases()
        #expect(cases.count >= 100)
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        for (body, field) in cases {
            let response = try harness.client().post("/v1/chat/completions", json: body)
            #expect((400..<500).contains(response.status), "\(body) → \(response.status)")
            let error = response.json?["error"]
            #expect(error?["type"]?.stringValue != nil && error?["code"]?.stringValue != nil, "\(body)")
            if !field.isEmpty {
                let named = (error?["param"]?.stringValue ?? "").hasPrefix(field) || (error?["message"]?.stringValue ?? "").contains(field)
                #expect(named, "\(body) → \(response.text)")
            }
        }
        #expect(try harness.client().get("/health").status == 200)
    }

    @Test func hostileMessagesRequestsGetAnthropicErrors() throws {
        let cases = try Self.messagesCases()
        #expect(cases.count >= 100)
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        for (body, field) in cases {
            let response = try harness.client().post("/v1/messages", json: body)
            #expect((400..<500).contains(response.status), "\(body) → \(response.status)")
            #expect(response.json?["type"] == "error", "\(body)")
            let message = response.json?["error"]?["message"]?.stringValue ?? ""
            #expect(response.json?["error"]?["type"]?.stringValue != nil, "\(body)")
            if !field.isEmpty { #expect(message.contains(field), "\(body) → \(response.text)") }
        }
        #expect(try harness.client().get("/health").status == 200)
    }

    /// One rule for an empty message in every dialect (ConversationItems): a user message whose content is an
    /// empty list is a 400 naming its content (Chat Completions and Responses answered 200 with an empty turn,
    /// Messages 400), and a Chat assistant message with `content: null` and `tool_calls: []` is a 400 too (it added
    /// nothing, silently).
    @Test func anEmptyMessageIsRefusedAlikeInEveryDialect() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let client = try harness.client()
        let chat = try client.post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":[]}]}"#)
        #expect(chat.status == 400, "\(chat.text)")
        #expect(chat.json?["error"]?["param"] == "messages[0].content")
        #expect(chat.json?["error"]?["code"] == "empty_array")
        let responses = try client.post("/v1/responses", json: #"{"model":"demo","input":[{"role":"user","content":[]}]}"#)
        #expect(responses.status == 400, "\(responses.text)")
        #expect(responses.json?["error"]?["param"] == "input[0].content")
        #expect(responses.json?["error"]?["code"] == "empty_array")
        let messages = try client.post(
            "/v1/messages", json: #"{"model":"demo","max_tokens":5,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yes"},{"role":"user","content":[]}]}"#)
        #expect(messages.status == 400, "\(messages.text)")
        #expect(messages.json?["error"]?["message"]?.stringValue?.contains("messages[2].content") == true, "\(messages.text)")
        let assistant = try client.post(
            "/v1/chat/completions",
            json: #"{"model":"demo","messages":[{"role":"user","content":"a"},{"role":"assistant","content":null,"tool_calls":[]},{"role":"user","content":"b"}]}"#)
        #expect(assistant.status == 400, "\(assistant.text)")
        #expect(assistant.json?["error"]?["param"] == "messages[1].content")
        // A non-empty conversation around them is answered as before.
        let fine = try client.post("/v1/chat/completions", json: #"{"model":"demo","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}"#)
        #expect(fine.status == 200)
    }

    /// An assistant message that says nothing (`content: []`, or only empty text) adds nothing to the conversation
    /// in every dialect (ConversationItems): Chat Completions dropped it, Messages and Responses sent the backend
    /// an empty assistant turn.
    @Test func anEmptyAssistantMessageAddsNothingInEveryDialect() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        for empty in ["[]", #""""#, #"[{"type":"text","text":""}]"#] {
            let bodies = [
                ("/v1/chat/completions", #"{"model":"demo","max_completion_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":\#(empty)},{"role":"user","content":"again"}]}"#),
                ("/v1/messages", #"{"model":"demo","max_tokens":8,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":\#(empty)},{"role":"user","content":"again"}]}"#),
                ("/v1/responses", #"{"model":"demo","max_output_tokens":8,"input":[{"role":"user","content":"hi"},{"role":"assistant","content":\#(empty)},{"role":"user","content":"again"}]}"#),
            ]
            let before = harness.records().filter { $0["event"] == "generate" }.count
            for (path, body) in bodies {
                let response = try harness.client().post(path, json: body)
                #expect(response.status == 200, "\(path) \(empty): \(response.text)")
            }
            let requests = harness.records().filter { $0["event"] == "generate" }.dropFirst(before).compactMap { record -> JSONValue? in
                guard var request = record["request"]?.objectValue else { return nil }
                request.removeValue(forKey: "response_id")
                return .object(request)
            }
            #expect(requests.count == 3)
            for (index, request) in requests.enumerated() {
                #expect(request["input"]?.arrayValue?.count == 2, "\(bodies[index].0) \(empty): \(request)")
                #expect(request == requests[0], "\(bodies[index].0) \(empty)")
            }
        }
    }
}
