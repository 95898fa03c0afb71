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

    /// The output as text: an image is described by its type and size (`[image image/png, 75 bytes]`); an error
    /// is prefixed so small models notice it. The agent sends the model ``text(describingImages:)`` instead, which
    /// points at the images it sends beside the output (docs/agents.md, "Images in tool outputs").
    public var text: String {
        text { mimeType, base64 in "[image \(mimeType), \(Self.byteCount(base64)) bytes]" }
    }

    /// The output as text, each image replaced by what `describe(mimeType, base64)` returns.
    public func text(describingImages describe: (_ mimeType: String, _ base64: String) -> String) -> String {
        let body = content.map { part in
            switch part {
            case .text(let text): text
            case .image(let mimeType, let base64): describe(mimeType, base64)
            }
        }.joined(separator: "\n")
        return isError && !body.hasPrefix("Error") ? "Error: \(body)" : body
    }

    /// The decoded size of base64 text (padding excluded).
    static func byteCount(_ base64: String) -> Int {
        let padding = base64.utf8.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        return max(base64.utf8.count / 4 * 3 - padding, 0)
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
