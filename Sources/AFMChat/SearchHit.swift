// SPDX-License-Identifier: Apache-2.0

/// One search result: a conversation whose title or message text matched.
public struct SearchHit: Sendable, Hashable {
    public var conversationID: String
    public var title: String
    /// The matching message's sequence, nil when only the title matched.
    public var sequence: Int64?
    /// Text around the match, with the matched words between `[` and `]`.
    public var snippet: String

    public init(conversationID: String, title: String, sequence: Int64?, snippet: String) {
        self.conversationID = conversationID
        self.title = title
        self.sequence = sequence
        self.snippet = snippet
    }
}
