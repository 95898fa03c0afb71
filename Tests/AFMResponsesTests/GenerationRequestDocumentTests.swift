// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
@testable import AFMResponses
import Testing

/// The generation request document written straight to bytes is the encoding of the document object, byte for byte.
@Suite struct GenerationRequestDocumentTests {
    static let bodies = [
        #"{"model":"m","input":"hi"}"#,
        #"{"model":"m","input":"say \"hi\"\n\u00e9\ud83d\ude00","stream":true,"instructions":"be brief"}"#,
        #"""
        {"model":"m","input":[{"role":"user","content":"weather?"},
          {"type":"function_call","call_id":"c1","name":"get_weather","arguments":"{\"city\":\"SF\"}"},
          {"type":"function_call_output","call_id":"c1","output":"sunny"}],
         "tools":[{"type":"function","name":"get_weather","description":"d","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}],
         "tool_choice":{"type":"function","name":"get_weather"},"parallel_tool_calls":false,
         "temperature":0.25,"top_p":1,"max_output_tokens":77,"reasoning":{"effort":"low"}}
        """#,
        #"{"model":"m","input":"x","temperature":null,"top_p":null,"tools":null,"tool_choice":null,"reasoning":null}"#,
    ]

    @Test(arguments: bodies) func theWrittenBytesAreTheObjectsEncoding(body: String) throws {
        let request = try ResponsesRequest(body: Array(body.utf8))
        let input = try GenerationRequestDocument.inputItems(request.items) { _, _ in nil }
        for system in [[], ["common prompt"] + request.system, ["a\"b", "c\u{1}d"]] {
            let object = GenerationRequestDocument.make(
                for: request, model: "concrete", responseID: "resp_1", maxOutputTokens: 512, system: system, input: input)
            let written = GenerationRequestDocument.encode(
                for: request, model: "concrete", responseID: "resp_1", maxOutputTokens: 512, system: system, input: input)
            #expect(String(decoding: written, as: UTF8.self) == String(decoding: object.encoded(), as: UTF8.self))
            // And it is the document a backend parses back.
            #expect(try JSONParser.parse(written) == object)
        }
    }

    /// `seed` and `top_k` are optional fields: written only when the client gave them, last, in both encodings.
    @Test func seedAndTopKAreWrittenOnlyWhenGiven() throws {
        var request = try ResponsesRequest(body: Array(#"{"model":"m","input":"hi"}"#.utf8)).pipeline
        func document() -> (object: JSONValue, written: String) {
            let object = GenerationRequestDocument.make(
                for: request, model: "m", responseID: "resp_1", maxOutputTokens: 8, system: [], input: [])
            let written = GenerationRequestDocument.encode(
                for: request, model: "m", responseID: "resp_1", maxOutputTokens: 8, system: [], input: [])
            return (object, String(decoding: written, as: UTF8.self))
        }
        #expect(document().object["seed"] == nil && document().object["top_k"] == nil)
        request.seed = -9_007_199_254_740_993
        request.topK = 40
        let (object, written) = document()
        #expect(object["seed"] == .number(JSONNumber(-9_007_199_254_740_993)) && object["top_k"] == 40)
        #expect(written == String(decoding: object.encoded(), as: UTF8.self))
        #expect(written.hasSuffix(#","seed":-9007199254740993,"top_k":40}"#))
    }
}
