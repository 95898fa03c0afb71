// SPDX-License-Identifier: Apache-2.0
import AFMClient

/// A stored message with its ordered content parts.
public struct ChatMessage: Sendable, Hashable, Identifiable {
    public var id: String
    public var conversationID: String
    /// The position in its conversation (increasing, never reused).
    public var sequence: Int64
    public var author: MessageAuthor
    public var state: MessageState
    /// Unix milliseconds.
    public var createdAt: Int64
    /// The model that actually answered (from `response.created`), for assistant messages.
    public var model: String?
    /// An error or context notice shown with the message ("older context was left out", the server's error).
    public var notice: String?
    public var parts: [ContentPart]
    /// The tokens the answer took (assistant messages the gateway reported usage for).
    public var usage: ResponseUsage?

    public init(
        id: String, conversationID: String, sequence: Int64, author: MessageAuthor, state: MessageState,
        createdAt: Int64, model: String? = nil, notice: String? = nil, parts: [ContentPart], usage: ResponseUsage? = nil
    ) {
        self.id = id
        self.conversationID = conversationID
        self.sequence = sequence
        self.author = author
        self.state = state
        self.createdAt = createdAt
        self.model = model
        self.notice = notice
        self.parts = parts
        self.usage = usage
    }

    /// All text parts joined.
    public var text: String { parts.compactMap(\.text).joined() }

    /// The image parts, in order.
    public var images: [ImageReference] { parts.compactMap(\.image) }
}
