// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMResponses
import Testing

/// Validation of request bodies against the policy table: every refusal names its field and code.
@Suite struct ResponsesRequestTests {
    @Test func acceptsTheSimplestRequest() throws {
        let request = try ResponsesRequest(body: Array(#"{"model":"m","input":"hi"}"#.utf8))
        #expect(request.model == "m")
        #expect(request.stream == false)
        #expect(request.items == [.message(role: "user", parts: [["type": "text", "text": "hi"]])])
    }

    @Test func keepsSystemTextApartFromTheConversation() throws {
        let body = #"""
            {"model":"m","instructions":"be brief","input":[
              {"role":"system","content":"sys"},
              {"type":"message","role":"developer","content":[{"type":"input_text","text":"dev"}]},
              {"role":"user","content":"q1"},
              {"type":"message","role":"assistant","content":[{"type":"output_text","text":"a1","annotations":[]}]},
              {"role":"user","content":[{"type":"input_text","text":"q2"}]}]}
            """#
        let request = try ResponsesRequest(body: Array(body.utf8))
        #expect(request.system == ["be brief", "sys", "dev"])
        #expect(request.items.count == 3)
    }

    @Test func acceptsAndEchoesWhatRealClientsSend() throws {
        let body = #"""
            {"model":"m","input":"x","store":false,"metadata":{"k":"v"},"prompt_cache_key":"t1","service_tier":"auto",
             "client_metadata":{"a":1},"text":{"format":{"type":"text"},"verbosity":"low"},"stream_options":{"include_obfuscation":false},
             "top_logprobs":0,"reasoning":null,"include":[],"truncation":"disabled","user":"u","safety_identifier":"s","background":false}
            """#
        let request = try ResponsesRequest(body: Array(body.utf8))
        #expect(request.body["prompt_cache_key"] == "t1")
    }

    static let refusals: [(body: String, code: String, param: String?)] = [
        (#"[]"#, "invalid_json", nil),
        (#"{"model":"m","input":"x""#, "invalid_json", nil),
        (String(repeating: "[", count: 100_000), "nesting_too_deep", nil),
        (#"{"input":"x"}"#, "missing_required_parameter", "model"),
        (#"{"model":"m"}"#, "missing_required_parameter", "input"),
        (#"{"model":5,"input":"x"}"#, "invalid_type", "model"),
        (#"{"model":"","input":"x"}"#, "invalid_type", "model"),
        (#"{"model":"m","input":5}"#, "invalid_type", "input"),
        (#"{"model":"m","input":[]}"#, "empty_array", "input"),
        (#"{"model":"m","input":"x","frobnicate":1}"#, "unknown_parameter", "frobnicate"),
        (#"{"model":"m","input":"x","previous_response_id":"resp_1"}"#, "previous_response_not_found", "previous_response_id"),
        (#"{"model":"m","input":"x","store":true}"#, "unsupported_parameter", "store"),
        (#"{"model":"m","input":"x","background":true}"#, "unsupported_parameter", "background"),
        (#"{"model":"m","input":"x","conversation":"c"}"#, "unsupported_parameter", "conversation"),
        (#"{"model":"m","input":"x","prompt":{"id":"p"}}"#, "unsupported_parameter", "prompt"),
        (#"{"model":"m","input":"x","stream":"yes"}"#, "invalid_type", "stream"),
        (#"{"model":"m","input":"x","temperature":3}"#, "invalid_value", "temperature"),
        (#"{"model":"m","input":"x","temperature":"hot"}"#, "invalid_type", "temperature"),
        (#"{"model":"m","input":"x","top_p":-0.1}"#, "invalid_value", "top_p"),
        (#"{"model":"m","input":"x","max_output_tokens":0}"#, "integer_below_min_value", "max_output_tokens"),
        (#"{"model":"m","input":"x","max_output_tokens":-5}"#, "integer_below_min_value", "max_output_tokens"),
        (#"{"model":"m","input":"x","max_output_tokens":1.5}"#, "invalid_type", "max_output_tokens"),
        (#"{"model":"m","input":"x","max_output_tokens":99999999999999999999999}"#, "invalid_type", "max_output_tokens"),
        (#"{"model":"m","input":"x","text":{"format":{"type":"json_schema"}}}"#, "missing_required_parameter", "text.format.name"),
        (#"{"model":"m","input":"x","top_logprobs":3}"#, "unsupported_parameter", "top_logprobs"),
        (#"{"model":"m","input":[{"role":"robot","content":"x"}]}"#, "invalid_value", "input[0].role"),
        (#"{"model":"m","input":[{"type":"message","content":"x"}]}"#, "missing_required_parameter", "input[0].role"),
        (#"{"model":"m","input":[{"role":"user"}]}"#, "missing_required_parameter", "input[0].content"),
        (#"{"model":"m","input":[{"role":"user","content":[{"text":"x"}]}]}"#, "missing_required_parameter", "input[0].content[0].type"),
        (#"{"model":"m","input":[{"role":"user","content":[{"type":"hologram"}]}]}"#, "invalid_value", "input[0].content[0].type"),
        (#"{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":7}]}]}"#, "invalid_value", "input[0].content[0].text"),
        (#"{"model":"m","input":[{"type":"teleport"}]}"#, "invalid_value", "input[0].type"),
        (#"{"model":"m","input":[7]}"#, "invalid_type", "input[0]"),
        (#"{"model":"m","input":[{"role":"system","content":"only system"}]}"#, "invalid_request", "input"),
        (#"{"model":"m","input":"x","tools":{}}"#, "invalid_type", "tools"),
    ]

    @Test(arguments: refusals)
    func refusesWithCodeAndParam(_ testCase: (body: String, code: String, param: String?)) {
        do {
            _ = try ResponsesRequest(body: Array(testCase.body.utf8))
            Issue.record("accepted \(testCase.body.prefix(80))")
        } catch {
            #expect(error.publicCode == testCase.code, "\(testCase.body.prefix(80))")
            #expect(error.param == testCase.param, "\(testCase.body.prefix(80))")
            #expect((400..<500).contains(error.httpStatus))
        }
    }
}
