// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// A tool call made by a real model (SmolLM2 under llama-server) comes back through afmd from an upstream in each
/// protocol, as a complete `function_call` item and as streamed argument deltas, and the tool's output goes back
/// for a text answer.
///
/// SmolLM2-135M never picks a tool on its own, so the requests force one: `tool_choice: "required"`, which
/// llama-server (with a tool-use template, `LlamaServer.toolTemplate`) turns into a grammar whose output must end
/// in a call matching the tool's schema. The grammar still lets free text come first, so the conversation shows
/// the model two earlier calls of the same tool (it then calls at once), and `temperature: 0` makes the answer
/// the same on every run.
@Suite(.serialized) struct ToolCallTests {
    private static let tool =
        #"{"type":"function","name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}"#

    /// Two earlier turns in which the assistant called the tool, then the question.
    private static let history = #"""
        {"role":"user","content":"Weather in Rome?"},
        {"type":"function_call","call_id":"call_rome","name":"get_weather","arguments":"{\"city\":\"Rome\"}"},
        {"type":"function_call_output","call_id":"call_rome","output":"sunny"},
        {"role":"assistant","content":"It is sunny in Rome."},
        {"role":"user","content":"Weather in Oslo?"},
        {"type":"function_call","call_id":"call_oslo","name":"get_weather","arguments":"{\"city\":\"Oslo\"}"},
        {"type":"function_call_output","call_id":"call_oslo","output":"rain"},
        {"role":"assistant","content":"It rains in Oslo."},
        {"role":"user","content":"Weather in Paris?"}
        """#

    private func request(input: String, toolChoice: String, stream: Bool) -> String {
        #"{"model":"private-cloud","temperature":0,"max_output_tokens":60,"stream":\#(stream),"tools":[\#(Self.tool)],"tool_choice":"\#(toolChoice)","input":[\#(input)]}"#
    }

    /// The arguments of a call, which must parse as a JSON object matching the tool's schema: exactly one key,
    /// `city`, a non-empty string.
    private func expectArgumentsMatchTheSchema(_ arguments: String?) throws {
        let text = try #require(arguments)
        let parsed = try JSONParser.parse(text)
        let object = try #require(parsed.objectValue, "arguments are not a JSON object: \(text)")
        #expect(object.keys == ["city"], "arguments: \(text)")
        #expect(object["city"]?.stringValue?.isEmpty == false, "arguments: \(text)")
    }

    @Test(arguments: ["chat-completions", "responses"])
    func aForcedToolCallRoundTripsThroughAfmd(wire: String) throws {
        let template = try #require(LlamaServer.toolTemplate, "the pinned llama.cpp sources are missing (run scripts/build-llama)")
        let upstream = try LlamaServer(extraArguments: ["--chat-template-file", template])
        let gateway = try CloudDaemon(
            cloud: "Upstreams=\(upstream.baseURL)\nProtocol=\(wire)\nModel=smol\nContextTokens=2048\nProbeIntervalSeconds=2")

        // 1. A complete response: one function_call item with a call_id and schema-valid arguments.
        let first = try gateway.respond(request(input: Self.history, toolChoice: "required", stream: false))
        #expect(first.status == 200, "\(first.text.prefix(800))")
        let output = try #require(first.json?["output"]?.arrayValue)
        let call = try #require(output.first { $0["type"]?.stringValue == "function_call" }, "no function_call in \(first.text.prefix(800))")
        #expect(call["name"]?.stringValue == "get_weather")
        let callID = try #require(call["call_id"]?.stringValue)
        #expect(!callID.isEmpty)
        #expect(call["status"]?.stringValue == "completed")
        try expectArgumentsMatchTheSchema(call["arguments"]?.stringValue)
        #expect(first.json?["status"]?.stringValue == "completed")

        // 2. The same over SSE: the item is announced, its arguments arrive as deltas, and done carries all of them.
        let streamed = try gateway.respond(request(input: Self.history, toolChoice: "required", stream: true))
        #expect(streamed.status == 200)
        let events = streamed.events
        let added = try #require(
            events.first { $0.event == "response.output_item.added" && $0.data["item"]?["type"]?.stringValue == "function_call" })
        let itemID = try #require(added.data["item"]?["id"]?.stringValue)
        #expect(added.data["item"]?["name"]?.stringValue == "get_weather")
        #expect(added.data["item"]?["call_id"]?.stringValue?.isEmpty == false)
        let deltas = events.filter { $0.event == "response.function_call_arguments.delta" }
        #expect(!deltas.isEmpty)
        #expect(deltas.allSatisfy { $0.data["item_id"]?.stringValue == itemID })
        let done = try #require(events.first { $0.event == "response.function_call_arguments.done" })
        #expect(done.data["item_id"]?.stringValue == itemID)
        #expect(done.data["arguments"]?.stringValue == deltas.compactMap { $0.data["delta"]?.stringValue }.joined())
        try expectArgumentsMatchTheSchema(done.data["arguments"]?.stringValue)
        let itemDone = try #require(
            events.first { $0.event == "response.output_item.done" && $0.data["item"]?["type"]?.stringValue == "function_call" })
        #expect(itemDone.data["item"]?["call_id"]?.stringValue == added.data["item"]?["call_id"]?.stringValue)
        #expect(itemDone.data["item"]?["arguments"]?.stringValue == done.data["arguments"]?.stringValue)
        #expect(events.last?.event == "response.completed", "\(streamed.text.suffix(600))")

        // 3. The tool's output goes back with the call; the model answers in text.
        let arguments = try #require(call["arguments"]?.stringValue)
        let callItem: JSONValue = [
            "type": "function_call", "call_id": .string(callID), "name": "get_weather", "arguments": .string(arguments),
        ]
        let outputItem: JSONValue = ["type": "function_call_output", "call_id": .string(callID), "output": "cloudy, 18 C"]
        let answer = try gateway.respond(
            request(input: Self.history + "," + callItem.jsonString + "," + outputItem.jsonString, toolChoice: "auto", stream: true))
        #expect(answer.status == 200)
        let text = outputText(answer.events)
        #expect(!text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(answer.text.suffix(800))")
        #expect(["response.completed", "response.incomplete"].contains(answer.events.last?.event ?? ""))
        print("private-cloud (\(wire)): get_weather(\(arguments)) → \"\(text)\"")
    }
}
