// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Golden transcripts of the Chat Completions and Messages dialects: the exact bytes of a body or stream (ids and
/// times normalized) for text, a tool call, a capped answer, a stop sequence, a failure mid-stream, and (Chat
/// Completions) a structured answer.
/// Regenerate with `AFM_UPDATE_GOLDEN=1` and review the diff like code.
@Suite struct DialectGoldenTests {
    static let tool = #"{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}"#
    static let chat = #"{"model":"demo","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":\#(tool)}}]"#
    static let messages = #"{"model":"demo","max_tokens":50,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"get_weather","input_schema":\#(tool)}]"#

    static let scripts = [
        "text": #"[{"text":"Hel"},{"text":"lo!"},{"usage":{"input_tokens":9,"output_tokens":2,"reasoning_tokens":0,"cached_tokens":0}}]"#,
        "tool": #"[{"text":"Let me see."},{"tool_call":{"name":"get_weather","call_id":"call_abc","arguments":"{\"city\":\"SF\"}","chunks":2}},{"usage":{"input_tokens":5,"output_tokens":7,"reasoning_tokens":0,"cached_tokens":0}},{"finish":"tool_calls"}]"#,
        "capped": #"[{"text":"a"},{"text":"b"},{"usage":{"input_tokens":3,"output_tokens":2,"reasoning_tokens":0,"cached_tokens":0}},{"finish":"length"}]"#,
        "stop": #"[{"text":"one, two"},{"text":", three"},{"usage":{"input_tokens":3,"output_tokens":2,"reasoning_tokens":0,"cached_tokens":0}}]"#,
        "failed": #"[{"text":"partial"},{"error":{"code":"internal","message":"backend exploded"}}]"#,
        "structured": #"{"capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":false,"structured_output":true},"steps":[{"json":{"text":"{\"city\":\"Paris\"}","chunks":2}}]}"#,
    ]

    /// Chat Completions' `response_format` for the structured case (Messages has no structured output yet).
    static let responseFormat = #","response_format":{"type":"json_schema","json_schema":{"name":"City","strict":true,"schema":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}"#

    /// (script, dialect, streamed): every script in both dialects, as a body and as a stream.
    static let cases: [(String, String, Bool)] =
        ["text", "tool", "capped", "stop", "failed"].flatMap { script in
            ["chat", "messages"].flatMap { dialect in [(script, dialect, false), (script, dialect, true)] }
        } + [("structured", "chat", false), ("structured", "chat", true)]

    @Test(arguments: cases)
    func goldenTranscript(_ testCase: (script: String, dialect: String, stream: Bool)) throws {
        let (script, dialect, stream) = testCase
        let harness = try DaemonHarness(models: ["demo": Self.scripts[script]!])
        let stop =
            script == "stop" ? (dialect == "chat" ? #","stop":[", three"]"# : #","stop_sequences":[", three"]"#)
            : script == "structured" ? Self.responseFormat : ""
        let body = (dialect == "chat" ? Self.chat : Self.messages) + stop + (stream ? #","stream":true}"# : "}")
        let response = try harness.client().post(dialect == "chat" ? "/v1/chat/completions" : "/v1/messages", json: body)
        let name = "\(dialect)-\(script)\(stream ? ".sse" : ".json")"
        let transcript = "HTTP \(response.status)\n" + StreamingTests.normalize(response.text)
        let path = TestPaths.root + "/Tests/Fixtures/golden/" + name
        if ProcessInfo.processInfo.environment["AFM_UPDATE_GOLDEN"] == "1" {
            try transcript.write(toFile: path, atomically: true, encoding: .utf8)
        }
        let expected = try String(contentsOfFile: path, encoding: .utf8)
        #expect(transcript == expected, "\(name):\n\(transcript)")
    }
}
