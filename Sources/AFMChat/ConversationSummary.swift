// SPDX-License-Identifier: Apache-2.0

/// A conversation's row: what lists and headers show, without its messages.
public struct ConversationSummary: Sendable, Hashable, Identifiable {
    /// A stable id (a UUID for conversations made here; imported ids are kept).
    public var id: String
    public var title: String
    /// Unix milliseconds.
    public var createdAt: Int64
    public var updatedAt: Int64
    /// The sequence the next message gets.
    public var nextSequence: Int64
    public var messageCount: Int
    /// The start of the latest message's text.
    public var preview: String
    /// Unsent input.
    public var draft: String

    public init(
        id: String, title: String, createdAt: Int64, updatedAt: Int64, nextSequence: Int64 = 0, messageCount: Int = 0,
        preview: String = "", draft: String = ""
    ) {
        self.id = id
        self.title = title
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.nextSequence = nextSequence
        self.messageCount = messageCount
        self.preview = preview
        self.draft = draft
    }
}
