// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMImageCodec
import AFMJSON
import AFMStore
import AFMSystem
import Foundation

/// Imports an archive of the original app's chat history into a ``HistoryStore``.
///
/// The accepted format (`docs/chat-archive.md`): a directory with `conversations.json` and an `Images/`
/// folder. Everything is written in **one transaction**, together with an import marker (the SHA-256 of
/// `conversations.json`), so an archive is imported completely or not at all, and importing the same archive
/// again finds the marker and does nothing. The source files are only read.
///
/// ```
/// check   parse and validate the JSON; read each image once,        images.lock shared (other clients
///         decode it, write its file into the store                  keep reading and writing the history)
/// commit  BEGIN IMMEDIATE; the marker checked again (a concurrent    + the SQLite write lock, briefly
///         import of the same archive: "imported before"); rows,
///         ids checked against the history, the marker; COMMIT
/// ```
public struct ArchiveImporter {
    /// What an import did.
    public struct Outcome: Sendable, Hashable {
        public var conversations: Int
        public var messages: Int
        public var images: Int
        /// True when the marker showed the archive was imported before (nothing was changed).
        public var alreadyImported: Bool

        public init(conversations: Int, messages: Int, images: Int, alreadyImported: Bool) {
            self.conversations = conversations
            self.messages = messages
            self.images = images
            self.alreadyImported = alreadyImported
        }
    }

    /// A checked message, ready to insert.
    private struct PlannedMessage {
        var path: String
        var id: String
        var author: MessageAuthor
        var state: MessageState
        var parts: [ContentPart]
        var model: String?
        var notice: String?
        var createdAt: Int64
    }

    /// A checked conversation, ready to insert.
    private struct PlannedConversation {
        var path: String
        var id: String
        var title: String
        var draft: String
        var createdAt: Int64
        var updatedAt: Int64
        var messages: [PlannedMessage]
    }

    private let store: HistoryStore
    private let normalizer = ImageNormalizer()

    public init(store: HistoryStore) {
        self.store = store
    }

    /// Imports `directory`.
    ///
    /// - Throws: ``HistoryError`` naming the problem (a JSON path, a missing image file, a clash with stored
    ///   ids); nothing is changed in that case.
    public func importArchive(at directory: String) throws -> Outcome {
        let jsonPath = directory + "/conversations.json"
        // FileContents, not FileManager.contents(atPath:): Foundation's reader leaks a 4 KiB buffer for an empty
        // file (found by the chat-archive fuzz target; Fuzz/regressions/chat-archive/empty-file).
        guard let bytes = try? FileContents.read(path: jsonPath) else {
            throw HistoryError("\(jsonPath) cannot be read (is \(directory) an archive?)")
        }
        let digest = SHA256.hexDigest(bytes)
        let alreadyImported = Outcome(conversations: 0, messages: 0, images: 0, alreadyImported: true)
        if try isImported(digest) { return alreadyImported }
        let root: JSONValue
        do {
            root = try JSONParser.parse(bytes, limits: .init(maxDepth: 32))
        } catch {
            throw HistoryError("conversations.json is not valid JSON: \(error)")
        }
        guard root["format"]?.stringValue == "afm-chat-archive" else {
            throw HistoryError("conversations.json: \"format\" must be \"afm-chat-archive\"")
        }
        guard let version = root["version"]?.numberValue?.description, version == "1" else {
            throw HistoryError("conversations.json: unsupported \"version\" (this client reads version 1)")
        }
        guard let conversations = root["conversations"]?.arrayValue else {
            throw HistoryError("conversations.json: \"conversations\" must be an array")
        }
        var images: [String: ImageReference] = [:]
        var imagePartCount = 0
        var plan: [PlannedConversation] = []
        var messageCount = 0
        var importedMeanwhile = false
        do {
            // images.lock (shared) keeps the files written here from being swept before their rows commit.
            try store.whileWritingImageFiles {
                // Check everything, images decoded, before taking the write lock: decoding is the slow part.
                for (index, conversation) in conversations.enumerated() {
                    plan.append(
                        try check(
                            conversation, path: "conversations[\(index)]", directory: directory, images: &images,
                            imagePartCount: &imagePartCount))
                }
                messageCount = plan.reduce(0) { $0 + $1.messages.count }
                try store.connection.transaction {
                    // Another import of this archive may have committed while this one was checking.
                    if try isImported(digest) {
                        importedMeanwhile = true
                        return
                    }
                    for image in images.values { try store.insertImageRow(image) }
                    for conversation in plan { try insert(conversation) }
                    try store.connection.execute(
                        "INSERT INTO imports(archive_digest, source, imported_at, conversation_count, message_count) VALUES (?, ?, ?, ?, ?)",
                        [
                            .text(digest), .text(directory), .integer(StoreClock.nowMilliseconds()),
                            .integer(Int64(plan.count)), .integer(Int64(messageCount)),
                        ]
                    )
                }
            }
        } catch {
            // Files written for rows that were rolled back are no longer referenced. When the rows cannot be read
            // (a damaged database), nothing is removed: an unknown set of references must not look empty.
            _ = try? store.removeUnreferencedImageFiles()
            throw error
        }
        if importedMeanwhile {
            // The image files written here are the other import's (same content, same names) or unreferenced.
            _ = try? store.removeUnreferencedImageFiles()
            return alreadyImported
        }
        return Outcome(conversations: plan.count, messages: messageCount, images: imagePartCount, alreadyImported: false)
    }

    private func isImported(_ digest: String) throws -> Bool {
        try store.connection.scalarInteger("SELECT 1 FROM imports WHERE archive_digest = ?", [.text(digest)]) != nil
    }

    // MARK: - Checking

    private func check(
        _ value: JSONValue, path: String, directory: String, images: inout [String: ImageReference], imagePartCount: inout Int
    ) throws -> PlannedConversation {
        guard let id = value["id"]?.stringValue, !id.isEmpty else { throw HistoryError("\(path).id: a non-empty string is required") }
        let created = try timestamp(value["created_at"], path: path + ".created_at")
        let updated = try value["updated_at"].map { try timestamp($0, path: path + ".updated_at") } ?? created
        // The history's title bound holds for imports too; a longer title (a history from before the bound) is cut
        // rather than refused, so such an archive still imports.
        let title = HistoryStore.scalarPrefix(value["title"]?.stringValue ?? "", HistoryStore.maximumTitleCharacters)
        var conversation = PlannedConversation(
            path: path, id: id, title: title, draft: value["draft"]?.stringValue ?? "",
            createdAt: created, updatedAt: updated, messages: []
        )
        for (index, message) in (value["messages"]?.arrayValue ?? []).enumerated() {
            let messagePath = "\(path).messages[\(index)]"
            guard let messageID = message["id"]?.stringValue, !messageID.isEmpty else {
                throw HistoryError("\(messagePath).id: a non-empty string is required")
            }
            guard let author = message["author"]?.stringValue.flatMap(MessageAuthor.init(rawValue:)) else {
                throw HistoryError("\(messagePath).author: \"user\" or \"assistant\" is required")
            }
            var state = MessageState.complete
            if let text = message["state"]?.stringValue {
                guard let parsed = MessageState(rawValue: text) else {
                    throw HistoryError("\(messagePath).state: unknown state \"\(text)\"")
                }
                state = parsed == .pending ? .interrupted : parsed
            }
            var parts: [ContentPart] = []
            for (partIndex, part) in (message["parts"]?.arrayValue ?? []).enumerated() {
                let partPath = "\(messagePath).parts[\(partIndex)]"
                switch part["type"]?.stringValue {
                case "text":
                    guard let text = part["text"]?.stringValue else { throw HistoryError("\(partPath).text: a string is required") }
                    parts.append(.text(text))
                case "image":
                    parts.append(.image(try checkImage(part, path: partPath, directory: directory, images: &images)))
                    imagePartCount += 1
                default:
                    throw HistoryError("\(partPath).type: \"text\" or \"image\" is required")
                }
            }
            conversation.messages.append(
                PlannedMessage(
                    path: messagePath, id: messageID, author: author, state: state, parts: parts,
                    model: message["model"]?.stringValue, notice: message["notice"]?.stringValue,
                    createdAt: try timestamp(message["created_at"], path: messagePath + ".created_at")
                ))
        }
        return conversation
    }

    /// Reads and decodes an image file once (by file name), writes it into the store, and returns its reference.
    private func checkImage(
        _ part: JSONValue, path: String, directory: String, images: inout [String: ImageReference]
    ) throws -> ImageReference {
        guard let file = part["file"]?.stringValue, !file.isEmpty, !file.contains("/"), file != "..", file != "." else {
            throw HistoryError("\(path).file: a file name inside Images/ is required")
        }
        if let known = images[file] { return known }
        let imagePath = directory + "/Images/" + file
        guard let bytes = try? FileContents.read(path: imagePath) else {
            throw HistoryError("\(path): the image Images/\(file) is missing from the archive")
        }
        let info: (mimeType: String, width: Int, height: Int)
        do {
            info = try normalizer.inspect(bytes)
        } catch {
            throw HistoryError("\(path): Images/\(file): \(error)")
        }
        let reference = ImageReference(
            hash: SHA256.hexDigest(bytes), mimeType: info.mimeType, width: info.width, height: info.height, byteCount: bytes.count)
        try store.images.write(bytes, hash: reference.hash, mimeType: reference.mimeType)
        images[file] = reference
        return reference
    }

    /// An ISO 8601 string (with or without fractional seconds) or a number of Unix seconds, as milliseconds.
    private func timestamp(_ value: JSONValue?, path: String) throws -> Int64 {
        if let number = value?.numberValue, let seconds = Double(number.description) {
            // Int64(exactly:) is nil for what does not fit (1e17 seconds is 1e20 ms): an error, not a trap.
            guard let milliseconds = Int64(exactly: (seconds * 1000).rounded()) else {
                throw HistoryError("\(path): \(number.description) Unix seconds is out of range")
            }
            return milliseconds
        }
        if let text = value?.stringValue {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1000).rounded()) }
            formatter.formatOptions = [.withInternetDateTime]
            if let date = formatter.date(from: text) { return Int64((date.timeIntervalSince1970 * 1000).rounded()) }
        }
        throw HistoryError("\(path): an ISO 8601 date or Unix seconds is required")
    }

    // MARK: - Writing

    private func insert(_ conversation: PlannedConversation) throws {
        let connection = store.connection
        if try connection.scalarInteger("SELECT 1 FROM conversations WHERE id = ?", [.text(conversation.id)]) != nil {
            throw HistoryError(
                "\(conversation.path).id: conversation \(conversation.id) already exists in the history (imported from another archive, or twice in this one?)")
        }
        try connection.execute(
            "INSERT INTO conversations(id, title, created_at, updated_at, draft) VALUES (?, ?, ?, ?, ?)",
            [
                .text(conversation.id), .text(conversation.title), .integer(conversation.createdAt),
                .integer(conversation.updatedAt), .text(conversation.draft),
            ]
        )
        for message in conversation.messages {
            if try connection.scalarInteger("SELECT 1 FROM messages WHERE id = ?", [.text(message.id)]) != nil {
                throw HistoryError(
                    "\(message.path).id: message \(message.id) already exists in the history (imported from another archive, or twice in this one?)")
            }
            try store.appendMessage(
                conversationID: conversation.id, author: message.author, state: message.state, parts: message.parts,
                model: message.model, notice: message.notice, id: message.id, createdAt: message.createdAt
            )
        }
        // appendMessage moves updated_at forward; the archive's value wins.
        try connection.execute(
            "UPDATE conversations SET updated_at = ? WHERE id = ?", [.integer(conversation.updatedAt), .text(conversation.id)])
    }
}

// Uses the store's connection.
@available(*, unavailable)
extension ArchiveImporter: Sendable {}
