// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Structured outputs through the private cloud: the schema goes upstream (`text.format` to a second afmd over
/// Responses, `response_format` to llama-server over Chat Completions) in the client's property order, and the
/// host checks the answer that comes back.
@Suite(.serialized) struct StructuredOutputCloudTests {
    /// Properties deliberately not in alphabetical order: a sorted body would reorder them.
    static let schema = #"{"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"integer","minimum":0,"maximum":9}},"required":["zeta","alpha"]}"#
    static let format = #","text":{"format":{"type":"json_schema","name":"Pair","strict":true,"schema":\#(schema)}}"#

    private func cloud(_ upstream: String, protocol wire: String, model: String) -> String {
        "Upstreams=\(upstream)\nProtocol=\(wire)\nModel=\(model)\nContextTokens=2048\nProbeIntervalSeconds=2\n"
    }

    @Test func aSecondAfmdGetsTextFormatInSchemaOrderAndItsAnswerIsChecked() throws {
        let answer = JSONValue.string(#"{"zeta":"z","alpha":3}"#).jsonString
        let upstream = try CloudDaemon(
            cloud: nil,
            scriptedModels: [
                scriptedModel("pair", steps: #"[{"json":{"text":\#(answer),"chunks":3}}]"#),
                scriptedModel("broken", steps: #"[{"json":{"text":"{\"zeta\":1}"}}]"#),
            ])
        let gateway = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: "responses", model: "pair"))
        let response = try gateway.respond(#"{"model":"private-cloud","input":"pair?"\#(Self.format)}"#)
        #expect(response.status == 200, "\(response)")
        #expect(response.json?["status"] == "completed")
        #expect(response.json?["output"]?[0]?["content"]?[0]?["text"] == #"{"zeta":"z","alpha":3}"#)
        let sent = try #require(upstream.records().last { $0["event"] == "generate" }?["request"]?["output_format"])
        #expect(sent["type"] == "json_schema")
        #expect(sent["name"] == "Pair")
        #expect(sent["schema"]?["properties"]?.objectValue?.keys == ["zeta", "alpha"])

        // An upstream whose answer does not match fails the response at the gateway too (both afmds check).
        let broken = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: "responses", model: "broken"))
        let failed = try broken.respond(#"{"model":"private-cloud","input":"pair?"\#(Self.format)}"#)
        #expect(failed.status >= 500, "\(failed)")
    }

    @Test func llamaServerGetsResponseFormatAndAnswersValidJSON() throws {
        let upstream = try LlamaServer()
        let gateway = try CloudDaemon(cloud: cloud(upstream.baseURL, protocol: "chat-completions", model: "smol"))
        let response = try gateway.respond(
            #"{"model":"private-cloud","input":"Give a word and a digit.","max_output_tokens":200,"temperature":0\#(Self.format)}"#)
        #expect(response.status == 200, "\(response)")
        #expect(response.json?["status"] == "completed", "\(String(describing: response.json))")
        let text = try #require(response.json?["output"]?[0]?["content"]?[0]?["text"]?.stringValue)
        let value = try JSONParser.parse(text)
        #expect(value["zeta"]?.stringValue != nil)
        #expect((0...9).contains(value["alpha"]?.numberValue?.intValue ?? -1))
    }
}
