// SPDX-License-Identifier: Apache-2.0
import AFMStore
import AFMSystem
import Foundation

/// The chat history: conversations, messages with ordered parts, images by content hash, drafts and search.
///
/// One SQLite file (`history.sqlite`, WAL) plus an `images/` directory next to it. Every change a crash must
/// not tear is one transaction. Opening the store applies migrations, turns answers left `pending` by a dead
/// client into `interrupted`, and removes image files no row references.
///
/// Not `Sendable`: it owns a ``Connection``. The chat client uses it from its one (main) thread.
public final class HistoryStore {
    /// The SQLite connection (tests read it directly).
    public let connection: Connection
    public let images: ImageFileStore
    /// The directory holding `history.sqlite` and `images/`.
    public let directory: String
    /// How many answers were found pending at open and marked interrupted.
    public private(set) var reopenedPendingCount = 0

    /// The default data directory: `$XDG_DATA_HOME/afm`, else `~/.local/share/afm`.
    public static func defaultDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        if let data = environment["XDG_DATA_HOME"], data.hasPrefix("/") { return data + "/afm" }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + "/.local/share/afm"
    }

    /// Opens (creating) the history in `directory`.
    public init(directory: String) throws {
        try AtomicFile.makeDirectories(directory, mode: 0o700)
        self.directory = directory
        connection = try Connection(path: directory + "/history.sqlite")
        images = try ImageFileStore(directory: directory + "/images")
        try connection.migrate(HistorySchema.migrations)
        try connection.transaction {
            try connection.execute(
                "UPDATE messages SET state = 'interrupted', notice = coalesce(notice, 'the client stopped before the answer finished') WHERE state = 'pending'"
            )
            reopenedPendingCount = connection.changes
        }
        let known = Set(try connection.query("SELECT hash FROM images") { $0.text(0) })
        images.sweep(keeping: known)
    }

    // MARK: - Conversations

    /// Creates an empty conversation.
    public func createConversation(title: String = "", id: String = UUID().uuidString.lowercased()) throws -> ConversationSummary {
        let now = StoreClock.nowMilliseconds()
        try connection.execute(
            "INSERT INTO conversations(id, title, created_at, updated_at) VALUES (?, ?, ?, ?)",
            [.text(id), .text(title), .integer(now), .integer(now)]
        )
        return ConversationSummary(id: id, title: title, createdAt: now, updatedAt: now)
    }

    private static let summaryColumns =
        "id, title, created_at, updated_at, next_sequence, message_count, preview, draft"

    private static func summary(_ row: Statement) -> ConversationSummary {
        ConversationSummary(
            id: row.text(0), title: row.text(1), createdAt: row.integer(2), updatedAt: row.integer(3),
            nextSequence: row.integer(4), messageCount: row.int(5), preview: row.text(6), draft: row.text(7)
        )
    }

    /// Conversations newest first (by last change), `limit` at a time from `offset`.
    public func listConversations(limit: Int = 50, offset: Int = 0) throws -> [ConversationSummary] {
        try connection.query(
            "SELECT \(Self.summaryColumns) FROM conversations ORDER BY updated_at DESC, id DESC LIMIT ? OFFSET ?",
            [.integer(Int64(limit)), .integer(Int64(offset))],
            row: Self.summary
        )
    }

    /// The number of conversations.
    public func conversationCount() throws -> Int {
        Int(try connection.scalarInteger("SELECT count(*) FROM conversations") ?? 0)
    }

    /// The conversation with this id, or the only one whose id starts with it.
    public func conversation(id: String) throws -> ConversationSummary? {
        if let exact = try connection.query(
            "SELECT \(Self.summaryColumns) FROM conversations WHERE id = ?", [.text(id)], row: Self.summary
        ).first {
            return exact
        }
        guard id.count >= 4 else { return nil }
        let matches = try connection.query(
            "SELECT \(Self.summaryColumns) FROM conversations WHERE substr(id, 1, ?) = ? LIMIT 2",
            [.integer(Int64(id.count)), .text(id)],
            row: Self.summary
        )
        return matches.count == 1 ? matches[0] : nil
    }

    /// Renames a conversation.
    public func rename(conversationID: String, to title: String) throws {
        try connection.execute("UPDATE conversations SET title = ? WHERE id = ?", [.text(title), .text(conversationID)])
        guard connection.changes == 1 else { throw HistoryError("no conversation \(conversationID)") }
    }

    /// Deletes a conversation, its messages and parts (cascade), and image files no other message uses.
    public func delete(conversationID: String) throws {
        let orphans: [(String, String)] = try connection.transaction {
            try connection.execute("DELETE FROM conversations WHERE id = ?", [.text(conversationID)])
            guard connection.changes == 1 else { throw HistoryError("no conversation \(conversationID)") }
            return try deleteUnreferencedImages()
        }
        for (hash, _) in orphans { images.remove(hash: hash) }
        if try appState("current_conversation") == conversationID { try setAppState("current_conversation", nil) }
    }

    private func deleteUnreferencedImages() throws -> [(String, String)] {
        try connection.query(
            "DELETE FROM images WHERE hash NOT IN (SELECT image_hash FROM parts WHERE image_hash IS NOT NULL) RETURNING hash, mime_type"
        ) { ($0.text(0), $0.text(1)) }
    }

    /// Saves the unsent input of a conversation (nil: of the client with no conversation open).
    public func saveDraft(_ text: String, conversationID: String?) throws {
        if let conversationID {
            try connection.execute("UPDATE conversations SET draft = ? WHERE id = ?", [.text(text), .text(conversationID)])
        } else {
            try setAppState("draft", text.isEmpty ? nil : text)
        }
    }

    /// The draft of a conversation, or of the client with no conversation open.
    public func draft(conversationID: String?) throws -> String {
        if let conversationID {
            return try connection.scalarText("SELECT draft FROM conversations WHERE id = ?", [.text(conversationID)]) ?? ""
        }
        return try appState("draft") ?? ""
    }

    /// A small key/value table for client state (`current_conversation`, the loose draft).
    public func appState(_ key: String) throws -> String? {
        try connection.scalarText("SELECT value FROM app_state WHERE key = ?", [.text(key)])
    }

    public func setAppState(_ key: String, _ value: String?) throws {
        if let value {
            try connection.execute(
                "INSERT INTO app_state(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                [.text(key), .text(value)]
            )
        } else {
            try connection.execute("DELETE FROM app_state WHERE key = ?", [.text(key)])
        }
    }

    // MARK: - Messages

    /// The last `limit` messages before `sequence` (all when nil), oldest first.
    public func messages(conversationID: String, before sequence: Int64? = nil, limit: Int = 60) throws -> [ChatMessage] {
        let rows = try connection.query(
            """
            SELECT id, conversation_id, sequence, author, state, created_at, model, notice FROM messages
            WHERE conversation_id = ? AND sequence < ? ORDER BY sequence DESC LIMIT ?
            """,
            [.text(conversationID), .integer(sequence ?? Int64.max), .integer(Int64(limit))]
        ) { row in
            ChatMessage(
                id: row.text(0), conversationID: row.text(1), sequence: row.integer(2),
                author: MessageAuthor(rawValue: row.text(3)) ?? .user, state: MessageState(rawValue: row.text(4)) ?? .failed,
                createdAt: row.integer(5), model: row.optionalText(6), notice: row.optionalText(7), parts: []
            )
        }
        var messages = Array(rows.reversed())
        let partsStatement = try connection.prepare(
            """
            SELECT p.kind, p.text, i.hash, i.mime_type, i.width, i.height, i.byte_count
            FROM parts p LEFT JOIN images i ON i.hash = p.image_hash WHERE p.message_id = ? ORDER BY p.position
            """
        )
        for index in messages.indices {
            partsStatement.reset()
            try partsStatement.bind([.text(messages[index].id)])
            while try partsStatement.step() {
                if partsStatement.text(0) == "text" {
                    messages[index].parts.append(.text(partsStatement.text(1)))
                } else {
                    messages[index].parts.append(
                        .image(
                            ImageReference(
                                hash: partsStatement.text(2), mimeType: partsStatement.text(3), width: partsStatement.int(4),
                                height: partsStatement.int(5), byteCount: partsStatement.int(6)
                            )))
                }
            }
        }
        return messages
    }

    /// Stores image bytes (file first, then the row) and returns the reference.
    public func storeImage(_ bytes: [UInt8], mimeType: String, width: Int, height: Int) throws -> ImageReference {
        let hash = SHA256.hexDigest(bytes)
        try images.write(bytes, hash: hash, mimeType: mimeType)
        try connection.execute(
            "INSERT OR IGNORE INTO images(hash, mime_type, width, height, byte_count) VALUES (?, ?, ?, ?, ?)",
            [.text(hash), .text(mimeType), .integer(Int64(width)), .integer(Int64(height)), .integer(Int64(bytes.count))]
        )
        return ImageReference(hash: hash, mimeType: mimeType, width: width, height: height, byteCount: bytes.count)
    }

    /// The bytes of an image part.
    public func imageBytes(_ image: ImageReference) throws -> [UInt8] {
        try images.read(hash: image.hash, mimeType: image.mimeType)
    }

    /// Inserts one message with its parts and updates the conversation's counters; returns it.
    ///
    /// Runs inside the caller's transaction when there is one.
    @discardableResult
    public func appendMessage(
        conversationID: String, author: MessageAuthor, state: MessageState, parts: [ContentPart], model: String? = nil,
        notice: String? = nil, id: String = UUID().uuidString.lowercased(), createdAt: Int64 = StoreClock.nowMilliseconds()
    ) throws -> ChatMessage {
        try connection.transaction {
            guard let sequence = try connection.scalarInteger(
                "UPDATE conversations SET next_sequence = next_sequence + 1, message_count = message_count + 1, updated_at = max(updated_at, ?) WHERE id = ? RETURNING next_sequence - 1",
                [.integer(createdAt), .text(conversationID)]
            ) else { throw HistoryError("no conversation \(conversationID)") }
            try connection.execute(
                "INSERT INTO messages(id, conversation_id, sequence, author, state, created_at, model, notice) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    .text(id), .text(conversationID), .integer(sequence), .text(author.rawValue), .text(state.rawValue),
                    .integer(createdAt), .optional(model), .optional(notice),
                ]
            )
            let insertPart = try connection.prepare(
                "INSERT INTO parts(message_id, position, kind, text, image_hash) VALUES (?, ?, ?, ?, ?)"
            )
            for (position, part) in parts.enumerated() {
                insertPart.reset()
                switch part {
                case .text(let text):
                    try insertPart.bind([.text(id), .integer(Int64(position)), "text", .text(text), .null])
                case .image(let image):
                    try insertPart.bind([.text(id), .integer(Int64(position)), "image", .null, .text(image.hash)])
                }
                while try insertPart.step() {}
            }
            let message = ChatMessage(
                id: id, conversationID: conversationID, sequence: sequence, author: author, state: state,
                createdAt: createdAt, model: model, notice: notice, parts: parts
            )
            try updatePreview(conversationID: conversationID, message: message)
            return message
        }
    }

    private func updatePreview(conversationID: String, message: ChatMessage) throws {
        let text = message.text.split(whereSeparator: \.isNewline).joined(separator: " ")
        let preview = text.isEmpty && !message.images.isEmpty ? "[image]" : String(text.prefix(100))
        if !preview.isEmpty {
            try connection.execute("UPDATE conversations SET preview = ? WHERE id = ?", [.text(preview), .text(conversationID)])
        }
        if message.author == .user, !text.isEmpty {
            try connection.execute(
                "UPDATE conversations SET title = ? WHERE id = ? AND title = ''",
                [.text(String(text.prefix(60))), .text(conversationID)]
            )
        }
    }

    /// Starts a turn atomically: the user message (complete), an empty pending answer, and the draft cleared.
    public func beginTurn(conversationID: String, userParts: [ContentPart], model: String?) throws -> (user: ChatMessage, answer: ChatMessage) {
        try connection.transaction {
            let user = try appendMessage(conversationID: conversationID, author: .user, state: .complete, parts: userParts)
            let answer = try appendMessage(
                conversationID: conversationID, author: .assistant, state: .pending, parts: [.text("")], model: model
            )
            try connection.execute("UPDATE conversations SET draft = '' WHERE id = ?", [.text(conversationID)])
            return (user, answer)
        }
    }

    /// Saves the text streamed so far into a pending answer (so a crash keeps it, as interrupted).
    public func updateAnswer(messageID: String, text: String) throws {
        try connection.execute(
            "UPDATE parts SET text = ? WHERE message_id = ? AND position = 0 AND text IS NOT ?",
            [.text(text), .text(messageID), .text(text)]
        )
    }

    /// Finishes an answer: its text, state, actual model and notice, in one transaction.
    public func finishAnswer(messageID: String, text: String, state: MessageState, model: String?, notice: String?) throws {
        try connection.transaction {
            try updateAnswer(messageID: messageID, text: text)
            try connection.execute(
                "UPDATE messages SET state = ?, model = coalesce(?, model), notice = ? WHERE id = ?",
                [.text(state.rawValue), .optional(model), .optional(notice), .text(messageID)]
            )
            guard let conversationID = try connection.scalarText(
                "SELECT conversation_id FROM messages WHERE id = ?", [.text(messageID)]
            ) else { throw HistoryError("no message \(messageID)") }
            let preview = String(text.split(whereSeparator: \.isNewline).joined(separator: " ").prefix(100))
            try connection.execute(
                "UPDATE conversations SET updated_at = max(updated_at, ?), preview = CASE WHEN ? = '' THEN preview ELSE ? END WHERE id = ?",
                [.integer(StoreClock.nowMilliseconds()), .text(preview), .text(preview), .text(conversationID)]
            )
        }
    }

    // MARK: - Search

    /// Conversations whose title or message text contains every word of `text` (newest first).
    ///
    /// Message text is matched through the FTS5 index (word prefixes); image bytes are never read.
    public func search(_ text: String, limit: Int = 50) throws -> [SearchHit] {
        let words = text.split(whereSeparator: { $0.isWhitespace }).map(String.init)
        guard !words.isEmpty else { return [] }
        let query = words.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"*" }.joined(separator: " ")
        var hits = try connection.query(
            """
            SELECT c.id, c.title, m.sequence, snippet(parts_fts, 0, '[', ']', '…', 12)
            FROM parts_fts JOIN parts p ON p.rowid = parts_fts.rowid
            JOIN messages m ON m.id = p.message_id JOIN conversations c ON c.id = m.conversation_id
            WHERE parts_fts MATCH ? ORDER BY c.updated_at DESC, m.sequence DESC LIMIT ?
            """,
            [.text(query), .integer(Int64(limit))]
        ) { SearchHit(conversationID: $0.text(0), title: $0.text(1), sequence: $0.integer(2), snippet: $0.text(3)) }
        var titleSQL = "SELECT id, title FROM conversations WHERE 1"
        var arguments: [SQLValue] = []
        for word in words {
            titleSQL += " AND instr(lower(title), lower(?)) > 0"
            arguments.append(.text(word))
        }
        titleSQL += " ORDER BY updated_at DESC LIMIT ?"
        arguments.append(.integer(Int64(limit)))
        let titleHits = try connection.query(titleSQL, arguments) {
            SearchHit(conversationID: $0.text(0), title: $0.text(1), sequence: nil, snippet: $0.text(1))
        }
        hits.insert(contentsOf: titleHits, at: 0)
        return Array(hits.prefix(limit))
    }
}

// The store owns a Connection, which is confined to one thread.
@available(*, unavailable)
extension HistoryStore: Sendable {}
