// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// What a tool call gave back, as the model will read it.
///
/// A failure is an output too (``isError``): the model sees what went wrong and can recover, and the sibling
/// calls of the step go on (an exception would abort the turn).
public struct AgentToolOutput: Sendable, Hashable {
    /// One piece of an output.
    public enum Content: Sendable, Hashable {
        case text(String)
        /// An image (an MCP tool's `image` content), base64 as received.
        case image(mimeType: String, base64: String)
    }

    public var content: [Content]
    /// Whether this output reports a failure (a thrown error, a timeout, an MCP `isError` result, a spent budget).
    public var isError: Bool

    public init(content: [Content], isError: Bool = false) {
        self.content = content
        self.isError = isError
    }

    /// A text output.
    public static func text(_ text: String) -> AgentToolOutput {
        AgentToolOutput(content: [.text(text)])
    }

    /// An error output: the model reads `message`.
    public static func error(_ message: String) -> AgentToolOutput {
        AgentToolOutput(content: [.text(message)], isError: true)
    }

    /// The text the model reads (`function_call_output.output`). The gateway carries text outputs only, so an
    /// image is described by its type and size; an error is prefixed so small models notice it.
    public var text: String {
        let body = content.map { part in
            switch part {
            case .text(let text): text
            case .image(let mimeType, let base64): "[image \(mimeType), \(base64.utf8.count * 3 / 4) bytes]"
            }
        }.joined(separator: "\n")
        return isError && !body.hasPrefix("Error") ? "Error: \(body)" : body
    }

    /// `{"text":…,"is_error":…,"content":[{"type":"text","text":…}|{"type":"image","mime_type":…,"data":…}]}`.
    public var json: JSONValue {
        let parts: [JSONValue] = content.map { part in
            switch part {
            case .text(let text): ["type": "text", "text": .string(text)]
            case .image(let mimeType, let base64): ["type": "image", "mime_type": .string(mimeType), "data": .string(base64)]
            }
        }
        return ["text": .string(text), "is_error": .bool(isError), "content": .array(parts)]
    }
}
