// SPDX-License-Identifier: Apache-2.0
import AFMImageCodec
import AFMJSON
import AFMStore
import Foundation

/// Imports an archive of the original app's chat history into a ``HistoryStore``.
///
/// The accepted format (`docs/chat-archive.md`): a directory with `conversations.json` and an `Images/`
/// folder. Everything is checked and written in **one transaction**, together with an import marker (the
/// SHA-256 of `conversations.json`), so an archive is imported completely or not at all, and importing the
/// same archive again finds the marker and does nothing. The source files are only read.
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
        guard let data = FileManager.default.contents(atPath: jsonPath) else {
            throw HistoryError("\(jsonPath) cannot be read (is \(directory) an archive?)")
        }
        let bytes = [UInt8](data)
        let digest = SHA256.hexDigest(bytes)
        if try store.connection.scalarInteger("SELECT 1 FROM imports WHERE archive_digest = ?", [.text(digest)]) != nil {
            return Outcome(conversations: 0, messages: 0, images: 0, alreadyImported: true)
        }
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
        var counts = (messages: 0, images: 0)
        do {
            try store.connection.transaction {
                for (index, conversation) in conversations.enumerated() {
                    try importConversation(conversation, path: "conversations[\(index)]", directory: directory, counts: &counts)
                }
                try store.connection.execute(
                    "INSERT INTO imports(archive_digest, source, imported_at, conversation_count, message_count) VALUES (?, ?, ?, ?, ?)",
                    [
                        .text(digest), .text(directory), .integer(StoreClock.nowMilliseconds()),
                        .integer(Int64(conversations.count)), .integer(Int64(counts.messages)),
                    ]
                )
            }
        } catch {
            // Files written for rows that were rolled back are no longer referenced.
            let known = Set((try? store.connection.query("SELECT hash FROM images") { $0.text(0) }) ?? [])
            store.images.sweep(keeping: known)
            throw error
        }
        return Outcome(conversations: conversations.count, messages: counts.messages, images: counts.images, alreadyImported: false)
    }

    private func importConversation(
        _ value: JSONValue, path: String, directory: String, counts: inout (messages: Int, images: Int)
    ) throws {
        guard let id = value["id"]?.stringValue, !id.isEmpty else { throw HistoryError("\(path).id: a non-empty string is required") }
        if try store.connection.scalarInteger("SELECT 1 FROM conversations WHERE id = ?", [.text(id)]) != nil {
            throw HistoryError("\(path): conversation \(id) already exists in the history (imported from another archive?)")
        }
        let created = try timestamp(value["created_at"], path: path + ".created_at")
        let updated = try value["updated_at"].map { try timestamp($0, path: path + ".updated_at") } ?? created
        try store.connection.execute(
            "INSERT INTO conversations(id, title, created_at, updated_at, draft) VALUES (?, ?, ?, ?, ?)",
            [
                .text(id), .text(value["title"]?.stringValue ?? ""), .integer(created), .integer(updated),
                .text(value["draft"]?.stringValue ?? ""),
            ]
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
                    parts.append(.image(try importImage(part, path: partPath, directory: directory)))
                    counts.images += 1
                default:
                    throw HistoryError("\(partPath).type: \"text\" or \"image\" is required")
                }
            }
            try store.appendMessage(
                conversationID: id, author: author, state: state, parts: parts, model: message["model"]?.stringValue,
                notice: message["notice"]?.stringValue, id: messageID,
                createdAt: try timestamp(message["created_at"], path: messagePath + ".created_at")
            )
            counts.messages += 1
        }
        // appendMessage moves updated_at forward; the archive's value wins.
        try store.connection.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", [.integer(updated), .text(id)])
    }

    private func importImage(_ part: JSONValue, path: String, directory: String) throws -> ImageReference {
        guard let file = part["file"]?.stringValue, !file.isEmpty, !file.contains("/"), file != "..", file != "." else {
            throw HistoryError("\(path).file: a file name inside Images/ is required")
        }
        let imagePath = directory + "/Images/" + file
        guard let data = FileManager.default.contents(atPath: imagePath) else {
            throw HistoryError("\(path): the image Images/\(file) is missing from the archive")
        }
        let bytes = [UInt8](data)
        let info: (mimeType: String, width: Int, height: Int)
        do {
            info = try normalizer.inspect(bytes)
        } catch {
            throw HistoryError("\(path): Images/\(file): \(error)")
        }
        return try store.storeImage(bytes, mimeType: info.mimeType, width: info.width, height: info.height)
    }

    /// An ISO 8601 string (with or without fractional seconds) or a number of Unix seconds, as milliseconds.
    private func timestamp(_ value: JSONValue?, path: String) throws -> Int64 {
        if let number = value?.numberValue, let seconds = Double(number.description) {
            return Int64((seconds * 1000).rounded())
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
}

// Uses the store's connection.
@available(*, unavailable)
extension ArchiveImporter: Sendable {}
