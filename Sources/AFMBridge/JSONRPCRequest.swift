// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// One JSON-RPC 2.0 request or notification, parsed from one message (one line).
///
/// A message without `id` is a notification: it is handled but never answered, not even with an error.
/// `"id": null` is still a request (answered with `"id": null`).
public struct JSONRPCRequest: Sendable, Hashable {
    /// The id to answer with; nil for a notification.
    public var id: JSONValue?
    public var method: String
    /// The params object (`{}` when absent).
    public var params: JSONObject

    public var isNotification: Bool { id == nil }

    public init(id: JSONValue?, method: String, params: JSONObject) {
        self.id = id
        self.method = method
        self.params = params
    }

    /// What a message that is not a valid request gives: the error, and the id to answer with (the request's, when
    /// it could be read; `null` otherwise); `answer` is false for a notification, which is never answered.
    public struct Failure: Error, Sendable {
        public var error: JSONRPCError
        public var id: JSONValue
        public var answer: Bool
    }

    /// The most nested levels a message may have.
    public static let maxDepth = 64

    /// Parses one message (without its newline; a trailing `\r` is ignored).
    public init(message bytes: ArraySlice<UInt8>) throws(Failure) {
        var bytes = bytes
        if bytes.last == UInt8(ascii: "\r") { bytes = bytes.dropLast() }
        if Self.isContentLengthHeader(bytes) {
            throw Failure(
                error: .parseError(
                    "Content-Length framing is not spoken here: send one JSON-RPC message per line, without headers "
                        + "(newline-delimited JSON, as MCP's stdio transport)"),
                id: .null, answer: true)
        }
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(bytes), limits: .init(maxDepth: Self.maxDepth))
        } catch {
            throw Failure(error: .parseError("the message is not valid JSON: \(error.message)"), id: .null, answer: true)
        }
        if case .array = value {
            throw Failure(
                error: .invalidRequest("batches (JSON arrays) are not supported: send one request per line"), id: .null,
                answer: true)
        }
        guard case .object(let object) = value else {
            throw Failure(error: .invalidRequest("a request must be a JSON object, not \(value.typeName)"), id: .null, answer: true)
        }
        let id = object["id"]
        if let id {
            switch id {
            case .string, .number, .null: break
            default:
                throw Failure(error: .invalidRequest("id must be a string, a number or null"), id: .null, answer: true)
            }
        }
        guard object["jsonrpc"] == "2.0" else {
            throw Failure(error: .invalidRequest("jsonrpc must be \"2.0\""), id: id ?? .null, answer: id != nil)
        }
        guard let method = object["method"]?.stringValue else {
            let problem = object["method"] == nil ? "a request needs a method" : "method must be a string"
            // A message with result or error is a response; the bridge sends no requests, so it expects none.
            let hint = object["result"] != nil || object["error"] != nil ? " (the bridge sends no requests to answer)" : ""
            throw Failure(error: .invalidRequest(problem + hint), id: id ?? .null, answer: id != nil)
        }
        var params = JSONObject()
        if let value = object["params"], !value.isNull {
            guard case .object(let given) = value else {
                throw Failure(
                    error: .invalidParams("params", "must be an object (by-name parameters)"), id: id ?? .null, answer: id != nil)
            }
            params = given
        }
        self.init(id: id, method: method, params: params)
    }

    /// Whether the line looks like an LSP-style header (`Content-Length: 42`).
    static func isContentLengthHeader(_ bytes: ArraySlice<UInt8>) -> Bool {
        let prefix = Array("content-length:".utf8)
        guard bytes.count >= prefix.count else { return false }
        for (byte, expected) in zip(bytes.prefix(prefix.count), prefix) where byte | 0x20 != expected {
            return false
        }
        return true
    }
}
