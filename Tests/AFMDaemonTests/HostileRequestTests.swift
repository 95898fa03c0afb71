// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// A table of hostile and malformed requests: each gets a 4xx with a machine-readable code, never a 5xx, and the
/// daemon stays up.
@Suite struct HostileRequestTests {
    static func png(width: UInt32, height: UInt32) -> [UInt8] {
        var bytes: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]
        for value in [width, height] { bytes += withUnsafeBytes(of: value.bigEndian, Array.init) }
        bytes += [8, 6, 0, 0, 0, 0, 0, 0, 0]
        return bytes
    }

    static func imageRequest(_ url: String, count: Int = 1) -> String {
        let parts = (0..<count).map { _ in #"{"type":"input_image","image_url":"\#(url)"}"# }.joined(separator: ",")
        return #"{"model":"m","input":[{"role":"user","content":[\#(parts)]}]}"#
    }

    /// (label, raw body bytes).
    static func cases() -> [(String, [UInt8])] {
        var cases: [(String, String)] = []
        // Wrong types for every supported field.
        let wrongValues = ["1", "\"s\"", "[]", "{}", "true", "-3.5"]
        let fieldsAndAccepted: [(String, Set<String>)] = [
            ("model", ["\"s\""]), ("input", ["\"s\"", "[]"]), ("instructions", ["\"s\""]), ("stream", ["true"]),
            ("temperature", ["1"]), ("top_p", ["1"]), ("max_output_tokens", ["1"]), ("tools", ["[]"]), ("tool_choice", []),
            ("parallel_tool_calls", ["true"]), ("reasoning", ["{}"]), ("include", ["[]"]), ("truncation", []), ("text", ["{}"]),
            ("store", []),
        ]
        for (field, accepted) in fieldsAndAccepted {
            for value in wrongValues where !accepted.contains(value) {
                let base = field == "model" ? #"{"input":"x","model":\#(value)}"# : #"{"model":"m","input":"x","\#(field)":\#(value)}"#
                cases.append(("\(field)=\(value)", field == "input" ? #"{"model":"m","input":\#(value)}"# : base))
            }
        }
        // Huge, negative and fractional numbers.
        for (field, value) in [
            ("max_output_tokens", "-1"), ("max_output_tokens", "0"), ("max_output_tokens", "1e400"), ("max_output_tokens", "99999999999999999999999"),
            ("max_output_tokens", "2.5"), ("temperature", "-0.1"), ("temperature", "1e308"), ("temperature", "2.0001"), ("top_p", "1.5"),
            ("top_p", "-1e-9"), ("top_logprobs", "5"), ("top_logprobs", "-1"),
        ] {
            cases.append(("\(field)=\(value)", #"{"model":"m","input":"x","\#(field)":\#(value)}"#))
        }
        // Deep nesting in different places.
        for depth in [65, 200, 10_000] {
            cases.append(("nesting \(depth) in metadata", #"{"model":"m","input":"x","metadata":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"))
            cases.append(("nesting \(depth) in input", #"{"model":"m","input":"# + String(repeating: "[", count: depth) + String(repeating: "]", count: depth) + "}"))
        }
        // Malformed JSON.
        for body in [
            "", " ", "null", "[]", "\"text\"", "42", "{", #"{"model":"m","input":"x""#, #"{"model":"m","input":"x",}"#,
            #"{"model":"m",/*c*/"input":"x"}"#, #"{"model":"m","input":NaN}"#, #"{"model":"m","input":"x","model":"n"}"#,
            #"{"model":"m","input":"\u00"}"#, #"{"model":"m","input":"\ud800"}"#, "{'model':'m'}", #"{"model":"m","input":"x"} trailing"#,
        ] {
            cases.append(("json \(body.prefix(30))", body))
        }
        // Rejected and unknown parameters.
        for (field, value) in [
            ("previous_response_id", "\"resp_1\""), ("store", "true"), ("background", "true"), ("conversation", "\"c\""),
            ("prompt", "{\"id\":\"p\"}"), ("frequency_penalty", "1"), ("logit_bias", "{}"), ("n", "2"), ("functions", "[]"),
            ("response_format", "{}"), ("text", "{\"format\":{\"type\":\"json_schema\"}}"), ("text", "{\"format\":{\"type\":\"json_object\",\"strict\":true}}"),
        ] {
            cases.append(("param \(field)", #"{"model":"m","input":"x","\#(field)":\#(value)}"#))
        }
        // Models.
        for model in ["\"\"", "\"nope\"", "\"" + String(repeating: "m", count: 300) + "\"", "null"] {
            cases.append(("model \(model.prefix(12))", #"{"model":\#(model),"input":"x"}"#))
        }
        // Items.
        for items in [
            #"[{"role":"robot","content":"x"}]"#, #"[{"role":"user"}]"#, #"[{"role":"user","content":5}]"#, #"[{"role":"user","content":[{"type":"video"}]}]"#,
            #"[{"role":"user","content":[{"type":"input_text"}]}]"#, #"[{"role":"user","content":[{"text":"x"}]}]"#, #"[{"type":"telepathy"}]"#,
            #"[{"type":"item_reference","id":"msg_1"}]"#, #"[{"role":"user","content":[{"type":"input_file","file_id":"f"}]}]"#,
            #"[{"role":"user","content":[{"type":"output_text","text":"x"}]}]"#, #"[5]"#, #"["x"]"#, #"[null]"#,
            #"[{"role":"system","content":"only system"}]"#, #"[{"role":"assistant","content":[{"type":"input_image","image_url":"x"}]}]"#,
            #"[{"role":"user","content":"x"},{"type":"function_call_output","call_id":"nope","output":"x"}]"#,
            #"[{"type":"function_call_output","call_id":"c1","output":"x"},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]"#,
            #"[{"role":"user","content":"x"},{"type":"function_call","name":"f","arguments":"{}"}]"#,
            #"[{"role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":{}}]"#,
            #"[{"role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":5}]"#,
            #"[{"role":"user","content":"x"},{"type":"custom_tool_call_output","call_id":"zz","output":"x"}]"#,
            #"[{"role":"user","content":"x"},{"type":"reasoning","encrypted_content":5}]"#,
        ] {
            cases.append(("items \(items.prefix(40))", #"{"model":"m","input":\#(items)}"#))
        }
        // Tampered or foreign reasoning blobs.
        for blob in ["garbage", "afm1.", "afm1.AAAA", "afm2.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "afm1.!!!!", String(repeating: "A", count: 5000), "afm1." + String(repeating: "A", count: 200)] {
            cases.append(("reasoning blob \(blob.prefix(10))", #"{"model":"m","input":[{"role":"user","content":"q"},{"type":"reasoning","summary":[],"encrypted_content":"\#(blob)"}]}"#))
        }
        // Tools and tool choice.
        for tools in [
            #"[{"type":"function"}]"#, #"[{"type":"function","name":""}]"#, #"[{"type":"function","name":"has space"}]"#, #"[{"name":"f"}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object"}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{},"additionalProperties":true}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"oneOf":[{"type":"string"}]}}}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":"a"}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}}]"#,
            ##"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"$ref":"#/$defs/missing"}}}}]"##,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"array","items":5}}}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"integer","minimum":"zero"}}}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"number","minimum":5,"maximum":1}}}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"enum":[]}}}}]"#,
            #"[{"type":"function","name":"f","parameters":{"type":"teapot"}}]"#, #"[{"type":"function","name":"f","parameters":5}]"#,
            #"[{"type":"function","name":"f"},{"type":"function","name":"f"}]"#, #"[{"type":"quantum"}]"#, #"[5]"#,
            #"[{"type":"namespace","name":"n"}]"#, #"[{"type":"namespace","name":"n","tools":[{"type":"namespace","name":"m","tools":[]}]}]"#,
        ] {
            cases.append(("tools \(tools.prefix(50))", #"{"model":"m","input":"x","tools":\#(tools)}"#))
        }
        for choice in [
            #""sometimes""#, #"{"type":"function","name":"missing"}"#, #"{"type":"function"}"#, #"{"type":"web_search"}"#, #"{"type":"allowed_tools"}"#,
            #"{"name":"f"}"#, #""required""#,
        ] {
            cases.append(("tool_choice \(choice.prefix(30))", #"{"model":"m","input":"x","tool_choice":\#(choice)}"#))
        }
        cases.append(("tool_choice names dropped tool", #"{"model":"m","input":"x","tools":[{"type":"web_search"}],"tool_choice":{"type":"web_search"}}"#))
        // Images.
        let nineMiB = Data(png(width: 10, height: 10) + [UInt8](repeating: 0, count: 9 * 1024 * 1024)).base64EncodedString()
        for url in [
            "https://example.com/cat.png", "http://x/y.jpg", "data:image/png;base64,", "data:image/png;base64,!!!!", "data:image/png,rawbytes",
            "data:image/png;base64,iVBORw0KGgo", "data:text/plain;base64,aGVsbG8=", "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAAB",
            "data:image/png;base64," + Data(png(width: 0, height: 10)).base64EncodedString(),
            "data:image/png;base64," + Data(png(width: 20000, height: 10)).base64EncodedString(),
            "data:image/gif;base64,R0lGODlh", "data:image/jpeg;base64,/9j/4AAQ", "data:image/webp;base64,UklGRgAAAABXRUJQ", "not a url",
            "data:image/png;base64," + nineMiB,
        ] {
            cases.append(("image \(url.prefix(40))", imageRequest(url)))
        }
        let pixel = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
        cases.append(("five images", imageRequest(pixel, count: 5)))
        cases.append(("image on text-only model", imageRequest(pixel)))
        cases.append(("image file_id", #"{"model":"m","input":[{"role":"user","content":[{"type":"input_image","file_id":"file_1"}]}]}"#))
        // Reasoning effort against a model that does not reason, and unknown efforts.
        for effort in ["\"low\"", "\"extreme\"", "5", "\"none\""] {
            cases.append(("effort \(effort)", #"{"model":"m","input":"x","reasoning":{"effort":\#(effort)}}"#))
        }
        cases.append(("truncation sideways", #"{"model":"m","input":"x","truncation":"sideways"}"#))
        cases.append(("include not strings", #"{"model":"m","input":"x","include":[1]}"#))
        var result = cases.map { ($0.0, Array($0.1.utf8)) }
        // Invalid UTF-8 inside otherwise valid JSON.
        for bytes: [UInt8] in [[0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0xF8, 0x88, 0x80, 0x80, 0x80]] {
            result.append(("invalid utf-8 \(bytes)", Array(#"{"model":"m","input":""#.utf8) + bytes + Array(#""}"#.utf8)))
        }
        return result
    }

    @Test func everyHostileRequestGetsA4xxWithACode() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let cases = Self.cases()
        #expect(cases.count >= 150, "only \(cases.count) cases")
        var client = try harness.client()
        for (label, body) in cases {
            try client.sendRequest("POST", "/v1/responses", body: body, headers: ["Content-Type": "application/json"])
            let response = try client.readResponse()
            #expect((400..<500).contains(response.status), "\(label): \(response)")
            let code = response.json?["error"]?["code"]?.stringValue
            #expect(code?.isEmpty == false, "\(label): no error code in \(response)")
            if response.header("Connection")?.lowercased() == "close" { client = try harness.client() }
        }
        #expect(try harness.client().get("/health").status == 200)
        #expect(harness.daemon.process.isRunning)
        #expect(!harness.daemon.log.contains("fatal"))
    }
}
