// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The request limits every dialect shares (docs/responses-api.md, "Request limits"): at most 262,144 JSON values
/// in a body (checked while parsing, so a body of tiny values cannot build a tree many times its size), at most
/// 50,000 conversation items and at most 1,000 content parts in one message. Each is one rule of the shared
/// pipeline, answered in the dialect's envelope.
@Suite struct RequestLimitTests {
    /// The three dialects' paths, a body with `messages` standing for the conversation, and the field that names it.
    struct Dialect: Sendable {
        var path: String
        var body: @Sendable (_ model: String, _ conversation: String) -> String
        var field: String
        var openAI: Bool
    }

    static let dialects = [
        Dialect(path: "/v1/chat/completions", body: { #"{"model":"\#($0)","messages":\#($1)}"# }, field: "messages", openAI: true),
        Dialect(path: "/v1/messages", body: { #"{"model":"\#($0)","max_tokens":8,"messages":\#($1)}"# }, field: "messages", openAI: false),
        Dialect(path: "/v1/messages/count_tokens", body: { #"{"model":"\#($0)","messages":\#($1)}"# }, field: "messages", openAI: false),
        Dialect(path: "/v1/responses", body: { #"{"model":"\#($0)","input":\#($1)}"# }, field: "input", openAI: true),
    ]

    static let models = ["big": #"{"context_tokens":2000000,"steps":[{"text":"ok"}]}"#]

    /// One user message whose content is `parts` text parts (`input_text` on Responses).
    static func message(parts: Int, text: String, dialect: Dialect) -> String {
        let type = dialect.field == "input" ? "input_text" : "text"
        let part = #"{"type":"\#(type)","text":"\#(text)"}"#
        return #"[{"role":"user","content":[\#(Array(repeating: part, count: parts).joined(separator: ","))]}]"#
    }

    /// A body of 90,000 empty content parts (270,000 JSON values, 2.3 MB) is refused while it is parsed: 400
    /// `too_many_values`, in every dialect and in count_tokens. Such bodies (550,000 parts in 14 MB) were decoded
    /// whole, into the JSON tree and then the request, and peaked at 287 MB of afmd's memory.
    @Test func aBodyOfTooManyValuesIsRefusedWhileParsing() throws {
        let harness = try DaemonHarness(models: Self.models)
        for dialect in Self.dialects {
            let body = dialect.body("big", Self.message(parts: 90_000, text: "", dialect: dialect))
            let response = try harness.client().post(dialect.path, json: body)
            #expect(response.status == 400, "\(dialect.path): \(response.text.prefix(300))")
            if dialect.openAI {
                #expect(response.json?["error"]?["code"] == "too_many_values", "\(dialect.path): \(response.text.prefix(300))")
            } else {
                #expect(response.json?["type"] == "error")
                #expect(response.json?["error"]?["type"] == "invalid_request_error")
            }
            #expect(response.text.contains("262144"), "\(dialect.path): \(response.text.prefix(300))")
        }
        // The daemon is still there and answers.
        let chat = try harness.client().post("/v1/chat/completions", json: #"{"model":"big","messages":[{"role":"user","content":"x"}]}"#)
        #expect(chat.status == 200)
    }

    /// A message of 1,001 content parts is a 400 naming its content (`array_above_max_length`); 1,000 are served.
    @Test func aMessageHoldsAtMostAThousandContentParts() throws {
        let harness = try DaemonHarness(models: Self.models)
        for dialect in Self.dialects {
            let param = "\(dialect.field)[0].content"
            let over = try harness.client().post(dialect.path, json: dialect.body("big", Self.message(parts: 1_001, text: "a", dialect: dialect)))
            #expect(over.status == 400, "\(dialect.path): \(over.text.prefix(300))")
            if dialect.openAI {
                #expect(over.json?["error"]?["code"] == "array_above_max_length", "\(dialect.path): \(over.text.prefix(300))")
                #expect(over.json?["error"]?["param"] == .string(param), "\(dialect.path): \(over.text.prefix(300))")
            } else {
                #expect(over.json?["error"]?["type"] == "invalid_request_error")
                #expect(over.json?["error"]?["message"]?.stringValue?.contains(param) == true, "\(dialect.path): \(over.text.prefix(300))")
            }
            #expect(over.text.contains("1000"), "\(dialect.path): \(over.text.prefix(300))")
            let at = try harness.client().post(dialect.path, json: dialect.body("big", Self.message(parts: 1_000, text: "a", dialect: dialect)))
            #expect(at.status == 200, "\(dialect.path): \(at.text.prefix(300))")
        }
    }

    /// A conversation of 50,001 items is a 400 naming the conversation's field (`messages`, `input`).
    @Test func aConversationHoldsAtMostFiftyThousandItems() throws {
        let harness = try DaemonHarness(models: Self.models)
        for dialect in Self.dialects {
            let turn = #"{"role":"user","content":"x"}"#
            let body = dialect.body("big", "[" + Array(repeating: turn, count: 50_001).joined(separator: ",") + "]")
            let response = try harness.client().post(dialect.path, json: body)
            #expect(response.status == 400, "\(dialect.path): \(response.text.prefix(300))")
            if dialect.openAI {
                #expect(response.json?["error"]?["code"] == "array_above_max_length", "\(dialect.path): \(response.text.prefix(300))")
                #expect(response.json?["error"]?["param"] == .string(dialect.field), "\(dialect.path): \(response.text.prefix(300))")
            } else {
                #expect(response.json?["error"]?["message"]?.stringValue?.contains("50000") == true, "\(dialect.path): \(response.text.prefix(300))")
            }
        }
    }
}
