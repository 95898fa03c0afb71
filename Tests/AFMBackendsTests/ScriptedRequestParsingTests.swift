// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMTestSupport
import Testing

/// The scripted backend's own JSON reader for generation requests: strict about malformed documents, exact about
/// strings and numbers (it replaced Foundation's `JSONSerialization` on the request path).
@Suite struct ScriptedRequestParsingTests {
    /// A registry serving the scripted model `echo`, which answers with the last user message's text.
    private static func echoRegistry() async throws -> RegistryHarness {
        let harness = RegistryHarness()
        let script = try harness.writeScript(model: "echo", steps: #"[{"echo":true}]"#)
        try harness.directory.addScripted()
        let registry = RegistryHarness(directory: harness.directory, settings: ["scripted": ["Script": script]])
        await registry.registry.loadAll()
        return registry
    }

    private static func document(input: String, maxOutputTokens: String = "1024") -> [UInt8] {
        let input = #"[{"type":"message","role":"user","content":[{"type":"text","text":\#(input)}]}]"#
        return Array(
            #"{"request_version":1,"model":"echo","system":["Be brief."],"input":\#(input),"#
                .utf8) + Array(#""max_output_tokens":\#(maxOutputTokens)}"#.utf8)
    }

    @Test(arguments: [
        #"{"request_version":1,"model":"echo""#,  // unterminated object
        #"{"request_version":1,"model":"echo",}"#,  // trailing comma
        #"{"request_version":01,"model":"echo"}"#,  // leading zero
        #"{"request_version":1,"model":"ec\#u{01}ho"}"#,  // control character in a string
        #"{"request_version":1,"model":"echo"} x"#,  // trailing garbage
        #"{"request_version":1,"model":"\ud800"}"#,  // lone surrogate
        #"{"request_version":1,"model":"\x"}"#,  // invalid escape
        #"[1,2]"#,  // not an object
        String(repeating: "[", count: 600) + String(repeating: "]", count: 600),  // too deep
        // The same faults inside members the backend does not read (their values are checked, not built):
        #"{"request_version":1,"model":"echo","tools":[1,]}"#,
        #"{"request_version":1,"model":"echo","tool_choice":{"mode":"auto",}}"#,
        #"{"request_version":1,"model":"echo","temperature":01}"#,
        #"{"request_version":1,"model":"echo","response_id":"a\#u{01}b"}"#,
        #"{"request_version":1,"model":"echo","response_id":"\ud800"}"#,
        #"{"request_version":1,"model":"echo","response_id":"\q"}"#,
        #"{"request_version":1,"model":"echo","stream":tru}"#,
        #"{"request_version":1,"model":"echo","tools":{"a" 1}}"#,
        #"{"request_version":1,"model":"echo","tools":"#,
        #"{"request_version":1,"model":"echo","tools":"# + String(repeating: "[", count: 600)
            + String(repeating: "]", count: 600) + "}",
    ])
    func malformedDocumentsAreRefusedAsInvalidRequests(document: String) async throws {
        let registry = try await Self.echoRegistry()
        let lease = try registry.registry.lease(model: "echo")
        #expect {
            _ = try lease.start(requestDocument: Array(document.utf8))
        } throws: { error in
            (error as? AFMError)?.code == .invalidRequest
        }
    }

    /// The "b" of "ab" becomes 0xFF: in the text the backend reads, or in a member it only checks.
    @Test(arguments: [
        String(decoding: document(input: #""ab""#), as: UTF8.self),
        #"{"request_version":1,"model":"echo","response_id":"ab"}"#,
    ])
    func invalidUTF8IsRefused(document: String) async throws {
        let registry = try await Self.echoRegistry()
        let lease = try registry.registry.lease(model: "echo")
        var bytes = Array(document.utf8)
        // Safe to unwrap: both documents contain "ab".
        let index = bytes.indices.first { bytes[$0] == UInt8(ascii: "a") && bytes[$0 + 1] == UInt8(ascii: "b") }! + 1
        bytes[index] = 0xFF
        #expect(throws: AFMError.self) { _ = try lease.start(requestDocument: bytes) }
    }

    @Test func unreadMembersMayHoldAnyValidJSON() async throws {
        let registry = try await Self.echoRegistry()
        let lease = try registry.registry.lease(model: "echo")
        let document =
            #"{"response_id":"r\u00e9\"x\ud83d\ude00","tools":[{"type":"function","name":"f","#
            + #""parameters":{"a":[1,-2.5e3,true,false,null,{}],"b":[]}}],"tool_choice":{"mode":"auto"},"#
            + #""temperature":0.7,"top_p":null,"stream":false,"note":"café","request_version":1,"model":"echo","#
            + #""input":[{"type":"message","role":"user","content":[{"type":"text","text":"still read"}]}]}"#
        let events = await collect(try lease.start(requestDocument: Array(document.utf8)))
        #expect(text(of: events) == "still read")
    }

    @Test func escapesAndUnicodeDecodeExactly() async throws {
        let registry = try await Self.echoRegistry()
        let lease = try registry.registry.lease(model: "echo")
        let events = await collect(
            try lease.start(requestDocument: Self.document(input: #""caf\u00e9 \"q\" \ud83d\ude00 tab\tend \/ ü""#)))
        #expect(text(of: events) == "café \"q\" 😀 tab\tend / ü")
        #expect(events.last == .done(.stop))
    }

    @Test func integralNumbersAreAcceptedInAnyNotation() async throws {
        let registry = try await Self.echoRegistry()
        for notation in ["2", "2.0", "2e0", "20E-1"] {
            let lease = try registry.registry.lease(model: "echo")
            let events = await collect(
                try lease.start(requestDocument: Self.document(input: #""one two three""#, maxOutputTokens: notation)))
            #expect(text(of: events) == "one two", "max_output_tokens \(notation)")
            #expect(events.last == .done(.length))
        }
        let lease = try registry.registry.lease(model: "echo")
        #expect(throws: AFMError.self) {
            _ = try lease.start(requestDocument: Self.document(input: #""x""#, maxOutputTokens: "2.5"))
        }
        #expect(throws: AFMError.self) {
            _ = try lease.start(requestDocument: Self.document(input: #""x""#, maxOutputTokens: "true"))
        }
    }
}
