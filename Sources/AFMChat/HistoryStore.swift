// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMCore
import AFMStore
import AFMSystem
import Foundation

/// The chat history: conversations, messages with ordered parts, images by content hash, drafts and search.
///
/// One SQLite file (`history.sqlite`, WAL) plus an `images/` directory next to it. Every change a crash must
/// not tear is one transaction. Opening the store applies migrations (reading only, when there are none),
/// turns answers left `pending` by a store that no longer runs into `interrupted`, and removes image files
/// no row references.
///
/// Several processes may use one history at once:
///
/// ```
/// leases/OWNER.lock   flock held by each store for its lifetime (taken at its first turn or image);
///                     a pending answer and an image stored but not yet sent name their OWNER, and only
///                     the answers and holds of an OWNER whose lock is free (it exited or crashed) are
///                     cleaned up by another store
/// images.lock         shared while image files are written until their rows commit (storeImage, import);
///                     exclusive, never waited for, while unreferenced files are removed — when busy, the
///                     removal is skipped and a later one does it
/// ```
///
/// Not `Sendable`: it owns a ``Connection``. The chat client uses it from its one (main) thread.
public final class HistoryStore {
    /// The SQLite connection (tests read it directly).
    public let connection: Connection
    public let images: ImageFileStore
    /// The directory holding `history.sqlite` and `images/`.
    public let directory: String
    /// How many answers were found pending at open, their store gone, and marked interrupted.
    public private(set) var reopenedPendingCount = 0
    /// This store's owner id: names its pending answers and the images it holds.
    public let owner = UUID().uuidString.lowercased()
    /// The flock that shows other processes this store runs (taken on first need).
    private var lease: FileLock?
    private let imageLock: FileLock

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
        imageLock = try FileLock(path: directory + "/images.lock")
        try connection.migrate(HistorySchema.migrations)
        try releaseStoppedOwners()
        removeStaleLeases()
        try removeUnreferencedImageFiles()
    }

    deinit {
        // Our pending answers and holds are orphans from now on; the next store that opens cleans them up.
        if let lease { unlink(lease.path) }
    }

    // MARK: - Owners and image files

    private static let ownerNotice = "the client stopped before the answer finished"

    private func leasePath(_ owner: String) -> String { directory + "/leases/" + owner + ".lock" }

    /// Takes this store's lease (once), before anything names `owner` in the database.
    private func takeLease() throws {
        guard lease == nil else { return }
        try AtomicFile.makeDirectories(directory + "/leases", mode: 0o700)
        let lock = try FileLock(path: leasePath(owner))
        guard try lock.lock(.exclusive, wait: false) else { throw HistoryError("the lease \(lock.path) is taken") }
        lease = lock
    }

    /// Whether the store named `owner` still runs: its lease file exists and its lock is held.
    private func isRunning(_ owner: String?) -> Bool {
        guard let owner, !owner.isEmpty, !owner.contains("/") else { return false }
        if owner == self.owner { return lease != nil }
        // A lease we cannot open or test counts as held: leaving an answer pending is better than ending a live
        // one. Only a missing file (ENOENT: the store removed it, or never took it) means the store stopped.
        let lock: FileLock
        do {
            lock = try FileLock(path: leasePath(owner), create: false)
        } catch {
            return error.errno != Errno(rawValue: ENOENT)
        }
        guard let free = try? lock.lock(.exclusive, wait: false) else { return true }
        return !free
    }

    /// Marks the pending answers of stopped stores interrupted, drops their image holds and the image rows
    /// nothing references; takes the write lock only when there is something to change.
    private func releaseStoppedOwners() throws {
        let pendingOwners = try connection.query("SELECT DISTINCT owner FROM messages WHERE state = 'pending'") { $0.optionalText(0) }
        let holdOwners = try connection.query("SELECT DISTINCT owner FROM image_holds") { $0.text(0) }
        let stopped = Array(Set(pendingOwners + holdOwners.map { Optional($0) }).filter { !isRunning($0) })
        let unreferenced = try connection.scalarInteger("SELECT 1 FROM images WHERE \(Self.unreferencedImage) LIMIT 1") != nil
        guard !stopped.isEmpty || unreferenced else { return }
        try connection.transaction {
            reopenedPendingCount = 0
            for owner in stopped {
                try connection.execute(
                    "UPDATE messages SET state = 'interrupted', owner = NULL, notice = coalesce(notice, ?) WHERE state = 'pending' AND owner IS ?",
                    [.text(Self.ownerNotice), .optional(owner)]
                )
                reopenedPendingCount += connection.changes
                try connection.execute("DELETE FROM image_holds WHERE owner IS ?", [.optional(owner)])
            }
            try deleteUnreferencedImages()
        }
        for case let owner? in stopped where owner != self.owner { unlink(leasePath(owner)) }
    }

    /// Removes the lease files of stores that ended without removing theirs (killed, or exited without `deinit`).
    private func removeStaleLeases() {
        let leases = directory + "/leases"
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: leases) else { return }
        for name in names where name.hasSuffix(".lock") && name != owner + ".lock" {
            let path = leases + "/" + name
            // A store creates its lease file, then locks it: a young unlocked file may be in between.
            guard let modified = (try? FileManager.default.attributesOfItem(atPath: path))?[.modificationDate] as? Date,
                Date().timeIntervalSince(modified) > 60,
                let lock = try? FileLock(path: path, create: false), (try? lock.lock(.exclusive, wait: false)) == true
            else { continue }
            unlink(path)
        }
    }

    /// The condition of an image row that no part references and no store holds.
    private static let unreferencedImage =
        "hash NOT IN (SELECT image_hash FROM parts WHERE image_hash IS NOT NULL) AND hash NOT IN (SELECT hash FROM image_holds)"

    private func deleteUnreferencedImages() throws {
        try connection.execute("DELETE FROM images WHERE \(Self.unreferencedImage)")
    }

    /// Runs `body` (which writes image files and commits their rows) holding `images.lock` shared, so no
    /// other store removes the files as unreferenced before the rows are visible.
    func whileWritingImageFiles<R>(_ body: () throws -> R) throws -> R {
        try imageLock.lock(.shared, wait: true)
        defer { imageLock.unlock() }
        return try body()
    }

    /// Removes image files (and temporary files) no image row names.
    ///
    /// Runs only while no store writes image files (`images.lock` free), so a file whose row is not yet
    /// committed is never taken for an orphan; otherwise it does nothing and returns false.
    /// - Throws: when the rows cannot be read; nothing is removed then.
    @discardableResult
    public func removeUnreferencedImageFiles() throws -> Bool {
        guard try imageLock.lock(.exclusive, wait: false) else { return false }
        defer { imageLock.unlock() }
        let known = Set(try connection.query("SELECT hash FROM images") { $0.text(0) })
        images.sweep(keeping: known)
        return true
    }

    // MARK: - Conversations

    /// Creates an empty conversation.
    public func createConversation(title: String = "", id: String = UUID().uuidString.lowercased()) throws -> ConversationSummary {
        try Self.checkTitle(title)
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

    /// The longest title a conversation may be given (created or renamed): a title is shown in every list, in the
    /// web page and in the terminal, whichever client set it.
    public static let maximumTitleCharacters = 200

    /// Renames a conversation; a title longer than ``maximumTitleCharacters`` is refused.
    public func rename(conversationID: String, to title: String) throws {
        try Self.checkTitle(title)
        try connection.execute("UPDATE conversations SET title = ? WHERE id = ?", [.text(title), .text(conversationID)])
        guard connection.changes == 1 else { throw HistoryError("no conversation \(conversationID)") }
    }

    /// Deletes a conversation, its messages and parts (cascade), and the images no other message uses and no
    /// running store holds for a message it has not sent yet.
    ///
    /// The image files go after the commit, unless another store is writing image files just then (a later
    /// removal takes them).
    public func delete(conversationID: String) throws {
        try connection.transaction {
            try connection.execute("DELETE FROM conversations WHERE id = ?", [.text(conversationID)])
            guard connection.changes == 1 else { throw HistoryError("no conversation \(conversationID)") }
            try deleteUnreferencedImages()
        }
        _ = try? removeUnreferencedImageFiles()  // the delete is done; a file left behind goes at a later removal
        if try appState("current_conversation") == conversationID { try setAppState("current_conversation", nil) }
    }

    /// Saves the unsent input of a conversation (nil: of the client with no conversation open).
    ///
    /// - Throws: ``HistoryError`` `no conversation ID` when the conversation is gone (another process deleted
    ///   it): the text was saved nowhere, and the caller decides where it goes instead.
    public func saveDraft(_ text: String, conversationID: String?) throws {
        if let conversationID {
            try connection.execute("UPDATE conversations SET draft = ? WHERE id = ?", [.text(text), .text(conversationID)])
            guard connection.changes == 1 else { throw HistoryError("no conversation \(conversationID)") }
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

    // MARK: - Input history

    /// The most inputs kept per conversation (older ones are dropped as new ones arrive).
    public static let inputHistoryLimit = 1_000

    /// Records a line typed at the prompt in a conversation (nil: none open); the same line twice in a row is kept once.
    public func recordInput(_ text: String, conversationID: String?) throws {
        guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return }
        try connection.transaction {
            let last = try connection.scalarText(
                "SELECT text FROM input_history WHERE conversation_id IS ? ORDER BY id DESC LIMIT 1", [.optional(conversationID)])
            guard last != text else { return }
            try connection.execute(
                "INSERT INTO input_history(conversation_id, text, created_at) VALUES (?, ?, ?)",
                [.optional(conversationID), .text(text), .integer(StoreClock.nowMilliseconds())]
            )
            try connection.execute(
                """
                DELETE FROM input_history WHERE conversation_id IS ? AND id <= (
                    SELECT id FROM input_history WHERE conversation_id IS ? ORDER BY id DESC LIMIT 1 OFFSET ?)
                """,
                [.optional(conversationID), .optional(conversationID), .integer(Int64(Self.inputHistoryLimit))]
            )
        }
    }

    /// The inputs typed in a conversation, oldest first; with none open (nil), the newest inputs of every
    /// conversation, so a fresh prompt can still recall what was asked before.
    public func inputHistory(conversationID: String?, limit: Int = inputHistoryLimit) throws -> [String] {
        let rows: [String]
        if let conversationID {
            rows = try connection.query(
                "SELECT text FROM input_history WHERE conversation_id = ? ORDER BY id DESC LIMIT ?",
                [.text(conversationID), .integer(Int64(limit))]
            ) { $0.text(0) }
        } else {
            rows = try connection.query("SELECT text FROM input_history ORDER BY id DESC LIMIT ?", [.integer(Int64(limit))]) {
                $0.text(0)
            }
        }
        return rows.reversed()
    }

    // MARK: - Messages

    /// The last `limit` messages before `sequence` (all when nil), oldest first.
    public func messages(conversationID: String, before sequence: Int64? = nil, limit: Int = 60) throws -> [ChatMessage] {
        let rows = try connection.query(
            """
            SELECT id, conversation_id, sequence, author, state, created_at, model, notice, input_tokens, output_tokens
            FROM messages WHERE conversation_id = ? AND sequence < ? ORDER BY sequence DESC LIMIT ?
            """,
            [.text(conversationID), .integer(sequence ?? Int64.max), .integer(Int64(limit))]
        ) { row in
            ChatMessage(
                id: row.text(0), conversationID: row.text(1), sequence: row.integer(2),
                author: MessageAuthor(rawValue: row.text(3)) ?? .user, state: MessageState(rawValue: row.text(4)) ?? .failed,
                createdAt: row.integer(5), model: row.optionalText(6), notice: row.optionalText(7), parts: [],
                usage: row.isNull(8) ? nil : ResponseUsage(inputTokens: row.int(8), outputTokens: row.int(9))
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

    /// Stores image bytes (file first, then the row) for a message not sent yet and returns the reference.
    ///
    /// The image is held by this store (``owner``) until a message of this store references it
    /// (``beginTurn(conversationID:userParts:model:clearingDraft:)``), so another process's `delete` or sweep does not remove it meanwhile; if this
    /// store stops first, the next store that opens drops the hold and the unused image.
    public func storeImage(_ bytes: [UInt8], mimeType: String, width: Int, height: Int) throws -> ImageReference {
        let reference = ImageReference(
            hash: SHA256.hexDigest(bytes), mimeType: mimeType, width: width, height: height, byteCount: bytes.count)
        try takeLease()
        try whileWritingImageFiles {
            try images.write(bytes, hash: reference.hash, mimeType: mimeType)
            try connection.transaction {
                try insertImageRow(reference)
                try connection.execute(
                    "INSERT OR IGNORE INTO image_holds(hash, owner) VALUES (?, ?)", [.text(reference.hash), .text(owner)])
            }
        }
        return reference
    }

    /// Inserts the row of an image whose file is written (a row that exists is kept).
    func insertImageRow(_ image: ImageReference) throws {
        try connection.execute(
            "INSERT OR IGNORE INTO images(hash, mime_type, width, height, byte_count) VALUES (?, ?, ?, ?, ?)",
            [
                .text(image.hash), .text(image.mimeType), .integer(Int64(image.width)), .integer(Int64(image.height)),
                .integer(Int64(image.byteCount)),
            ]
        )
    }

    /// The image stored with this hash, nil when there is none.
    public func image(hash: String) throws -> ImageReference? {
        try connection.query(
            "SELECT hash, mime_type, width, height, byte_count FROM images WHERE hash = ?", [.text(hash)]
        ) { ImageReference(hash: $0.text(0), mimeType: $0.text(1), width: $0.int(2), height: $0.int(3), byteCount: $0.int(4)) }.first
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
                if let image = part.image {
                    // Referenced now: this store's hold from storeImage is no longer needed.
                    try connection.execute(
                        "DELETE FROM image_holds WHERE hash = ? AND owner = ?", [.text(image.hash), .text(owner)])
                }
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
        let preview = text.isEmpty && !message.images.isEmpty ? "[image]" : Self.scalarPrefix(text, 100)
        if !preview.isEmpty {
            try connection.execute("UPDATE conversations SET preview = ? WHERE id = ?", [.text(preview), .text(conversationID)])
        }
        if message.author == .user, !text.isEmpty {
            try connection.execute(
                "UPDATE conversations SET title = ? WHERE id = ? AND title = ''",
                [.text(Self.scalarPrefix(text, 60)), .text(conversationID)]
            )
        }
    }

    /// Starts a turn atomically: the user message (complete; it releases this store's holds on its images), an
    /// empty pending answer owned by this store, and (unless `clearingDraft` is false) the draft cleared.
    ///
    /// - Parameter clearingDraft: false when the message was not typed from the draft (a piped session), so a
    ///   draft saved by an interactive session survives.
    public func beginTurn(
        conversationID: String, userParts: [ContentPart], model: String?, clearingDraft: Bool = true
    ) throws -> (user: ChatMessage, answer: ChatMessage) {
        try takeLease()
        return try connection.transaction {
            let user = try appendMessage(conversationID: conversationID, author: .user, state: .complete, parts: userParts)
            let answer = try appendMessage(
                conversationID: conversationID, author: .assistant, state: .pending, parts: [.text("")], model: model
            )
            try connection.execute("UPDATE messages SET owner = ? WHERE id = ?", [.text(owner), .text(answer.id)])
            if clearingDraft {
                try connection.execute("UPDATE conversations SET draft = '' WHERE id = ?", [.text(conversationID)])
            }
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

    /// Finishes an answer: its text, state, actual model, notice and token usage, in one transaction.
    public func finishAnswer(
        messageID: String, text: String, state: MessageState, model: String?, notice: String?, usage: ResponseUsage? = nil
    ) throws {
        try connection.transaction {
            try updateAnswer(messageID: messageID, text: text)
            try connection.execute(
                "UPDATE messages SET state = ?, model = coalesce(?, model), notice = ?, owner = NULL, input_tokens = ?, output_tokens = ? WHERE id = ?",
                [
                    .text(state.rawValue), .optional(model), .optional(notice), usage.map { .integer(Int64($0.inputTokens)) } ?? .null,
                    usage.map { .integer(Int64($0.outputTokens)) } ?? .null, .text(messageID),
                ]
            )
            guard let conversationID = try connection.scalarText(
                "SELECT conversation_id FROM messages WHERE id = ?", [.text(messageID)]
            ) else { throw HistoryError("no message \(messageID)") }
            let preview = Self.scalarPrefix(text.split(whereSeparator: \.isNewline).joined(separator: " "), 100)
            try connection.execute(
                "UPDATE conversations SET updated_at = max(updated_at, ?), preview = CASE WHEN ? = '' THEN preview ELSE ? END WHERE id = ?",
                [.integer(StoreClock.nowMilliseconds()), .text(preview), .text(preview), .text(conversationID)]
            )
        }
    }

    // MARK: - Search

    /// The words of a search that count (``search(_:limit:markers:)``).
    public static let maximumSearchWords = 32

    /// Whether `title` is within ``maximumTitleCharacters``, counted in Unicode scalars: a count of characters
    /// (grapheme clusters) would let one "character" with 100,000 combining marks through.
    public static func titleFits(_ title: String) -> Bool {
        title.unicodeScalars.count <= maximumTitleCharacters
    }

    private static func checkTitle(_ title: String) throws {
        guard titleFits(title) else {
            throw HistoryError(
                "a title has at most \(maximumTitleCharacters) characters (this one has \(title.unicodeScalars.count))")
        }
    }

    /// The first `count` Unicode scalars of `text` (a bound in scalars, like the title's: `prefix` on a `String`
    /// counts grapheme clusters, of unbounded size each).
    public static func scalarPrefix(_ text: String, _ count: Int) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(count)))
    }

    /// Conversations whose title or message text contains every word of `text` (newest first).
    ///
    /// Message text is matched through the FTS5 index (word prefixes); image bytes are never read. Only the first
    /// ``maximumSearchWords`` words count: each is a clause of the SQL, and SQLite refuses a query over 1000 deep.
    /// - Parameter markers: what is put around the matched words in message snippets.
    public func search(_ text: String, limit: Int = 50, markers: (open: String, close: String) = ("[", "]")) throws -> [SearchHit] {
        let words = text.split(whereSeparator: { $0.isWhitespace }).prefix(Self.maximumSearchWords).map(String.init)
        guard !words.isEmpty else { return [] }
        let query = words.map { "\"" + $0.replacingOccurrences(of: "\"", with: "\"\"") + "\"*" }.joined(separator: " ")
        var hits = try connection.query(
            """
            SELECT c.id, c.title, m.sequence, snippet(parts_fts, 0, ?, ?, '…', 12)
            FROM parts_fts JOIN parts p ON p.id = parts_fts.rowid
            JOIN messages m ON m.id = p.message_id JOIN conversations c ON c.id = m.conversation_id
            WHERE parts_fts MATCH ? ORDER BY c.updated_at DESC, m.sequence DESC LIMIT ?
            """,
            [.text(markers.open), .text(markers.close), .text(query), .integer(Int64(limit))]
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
