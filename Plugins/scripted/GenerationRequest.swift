// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// The parts of a generation request document the scripted backend uses.
///
/// ```json
/// {"request_version":1,"response_id":"resp_1","model":"scripted-demo","system":["Be brief."],
///  "input":[{"type":"message","role":"user","content":[{"type":"text","text":"Hello"}]}],
///  "tools":[],"tool_choice":{"mode":"auto"},"parallel_tool_calls":true,"max_output_tokens":1024,
///  "temperature":null,"top_p":null,"reasoning_effort":null,"stream":true}
/// ```
///
/// Everything else in the document is accepted unread (and recorded verbatim).
struct GenerationRequest: Sendable, Hashable {
    /// The only `request_version` this backend reads.
    static let version = 1

    /// The requested model id.
    var model: String
    /// The text of the last `message` item with role `user` (its text parts concatenated), or "".
    var lastUserText: String
    /// How many `input` items have each `type` (`message`, `function_call`, `function_call_output`, …), for
    /// `if_input_has`.
    var inputItemCounts: [String: Int]
    /// Whether `tools` offers at least one tool, for `if_tools_offered`.
    var offersTools: Bool
    /// UTF-8 bytes of all input text: every `system` string and every text part of every `message` item.
    var inputTextBytes: Int
    /// `max_output_tokens`, or nil when absent or null (then the model's budget applies).
    var maxOutputTokens: Int?

    /// The input size in tokens by the scripted rule: ceil(bytes / 4).
    var inputTokens: Int { inputTextBytes / 4 + (inputTextBytes % 4 == 0 ? 0 : 1) }

    /// The members of a request document this backend reads; the parser only checks the others.
    static let readKeys = ["request_version", "model", "system", "input", "max_output_tokens", "tools"]

    /// Parses the bytes of a request document, which must be a JSON object.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` saying why the bytes are not a JSON object.
    static func document(from json: Data) throws(BackendError) -> JSONNode {
        let parsed = json.withUnsafeBytes { raw in
            Result { () throws(BackendError) in try document(parsing: raw.assumingMemoryBound(to: UInt8.self)) }
        }
        return try parsed.get()
    }

    /// Parses borrowed bytes of a request document (the `generate` call's span, without a copy).
    static func document(parsing json: UnsafeBufferPointer<UInt8>) throws(BackendError) -> JSONNode {
        let parsed = Result { () throws(JSONNodeParser.Failure) in
            try JSONNodeParser.parse(json, keepingTopLevelKeys: readKeys)
        }
        switch parsed {
        case .success(let node):
            guard node.isObject else { throw .invalidRequest("not a JSON object") }
            return node
        case .failure(let failure):
            throw .invalidRequest("not valid JSON (\(failure.message))")
        }
    }

    /// Validates a parsed request document.
    ///
    /// - Throws: `AFM_ERR_INCOMPATIBLE` for another `request_version`; `AFM_ERR_INVALID_REQUEST` when a field the
    ///   backend reads has the wrong type.
    init(parsing object: JSONNode) throws(BackendError) {
        guard let version = object["request_version"]?.int else {
            throw .invalidRequest("generation request: request_version must be an integer")
        }
        guard version == Self.version else {
            throw .incompatible(
                "generation request has request_version \(version); the scripted backend reads version \(Self.version)")
        }
        guard let model = object["model"]?.string else {
            throw .invalidRequest("generation request: model must be a string")
        }
        var bytes = 0
        if !JSONNode.isNullOrMissing(object["system"]) {
            guard let system = object["system"]?.array else {
                throw .invalidRequest("generation request: system must be an array of strings")
            }
            for (index, item) in system.enumerated() {
                guard let text = item.string else {
                    throw .invalidRequest("generation request: system[\(index)] must be a string")
                }
                bytes += text.utf8.count
            }
        }
        var lastUserText = ""
        var inputItemCounts: [String: Int] = [:]
        if !JSONNode.isNullOrMissing(object["input"]) {
            guard let input = object["input"]?.array else {
                throw .invalidRequest("generation request: input must be an array of items")
            }
            for (index, item) in input.enumerated() {
                guard item.isObject else {
                    throw .invalidRequest("generation request: input[\(index)] must be an object")
                }
                let type = item["type"]?.string
                if let type { inputItemCounts[type, default: 0] += 1 }
                guard type == "message" else { continue }
                let text = try Self.messageText(item["content"], at: "input[\(index)].content")
                bytes += text.utf8.count
                if item["role"]?.string == "user" { lastUserText = text }
            }
        }
        var maxOutputTokens: Int?
        if !JSONNode.isNullOrMissing(object["max_output_tokens"]) {
            guard let value = object["max_output_tokens"]?.int, value >= 0 else {
                throw .invalidRequest("generation request: max_output_tokens must be a non-negative integer or null")
            }
            maxOutputTokens = value
        }
        self.model = model
        self.lastUserText = lastUserText
        self.inputItemCounts = inputItemCounts
        self.offersTools = !(object["tools"]?.array?.isEmpty ?? true)
        self.inputTextBytes = bytes
        self.maxOutputTokens = maxOutputTokens
    }

    /// Whether a conditional step's condition holds for this request.
    func satisfies(_ condition: ScriptStep.Condition) -> Bool {
        switch condition {
        case .inputHas(let type, let count): inputItemCounts[type, default: 0] >= count
        case .toolsOffered: offersTools
        }
    }

    /// The concatenated `text` parts of a message's `content` (a plain string is accepted as one text part).
    private static func messageText(_ content: JSONNode?, at path: String) throws(BackendError) -> String {
        if JSONNode.isNullOrMissing(content) { return "" }
        if let text = content?.string { return text }
        guard let parts = content?.array else {
            throw .invalidRequest("generation request: \(path) must be an array of parts")
        }
        var text = ""
        for (index, part) in parts.enumerated() {
            guard part.isObject else {
                throw .invalidRequest("generation request: \(path)[\(index)] must be an object")
            }
            guard part["type"]?.string == "text" else { continue }
            guard let piece = part["text"]?.string else {
                throw .invalidRequest("generation request: \(path)[\(index)].text must be a string")
            }
            text += piece
        }
        return text
    }
}
