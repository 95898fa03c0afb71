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
        Array(
            #"{"request_version":1,"model":"echo","system":["Be brief."],"input":[{"type":"message","role":"user","content":[{"type":"text","text":\#(input)}]}],"max_output_tokens":\#(maxOutputTokens)}"#
                .utf8)
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

    @Test func invalidUTF8IsRefused() async throws {
        let registry = try await Self.echoRegistry()
        let lease = try registry.registry.lease(model: "echo")
        var bytes = Self.document(input: #""ab""#)
        // Safe to unwrap: the document contains "ab".
        let index = bytes.firstIndex(of: UInt8(ascii: "b"))!
        bytes[index] = 0xFF
        #expect(throws: AFMError.self) { _ = try lease.start(requestDocument: bytes) }
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
