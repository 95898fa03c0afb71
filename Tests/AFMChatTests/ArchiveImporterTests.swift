// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

@Suite struct ArchiveImporterTests {
    /// Writes an archive with two conversations (one with an image) and returns its directory.
    private func makeArchive(missingImage: Bool = false, extraConversation: String = "") throws -> (String, [UInt8]) {
        let directory = TestPaths.makeTemporaryDirectory("afm-archive")
        try FileManager.default.createDirectory(atPath: directory + "/Images", withIntermediateDirectories: true)
        let image = try TestImages.png(width: 20, height: 10)
        if !missingImage { try Data(image).write(to: URL(fileURLWithPath: directory + "/Images/cat.png")) }
        let json = """
            {"format":"afm-chat-archive","version":1,"conversations":[
              {"id":"conv-a","title":"Cats","created_at":"2025-05-01T10:00:00Z","updated_at":"2025-05-02T10:00:00.250Z","draft":"and dogs?",
               "messages":[
                 {"id":"m1","author":"user","state":"complete","created_at":"2025-05-01T10:00:00Z","parts":[{"type":"text","text":"What is this?"},{"type":"image","file":"cat.png"}]},
                 {"id":"m2","author":"assistant","state":"complete","created_at":1746093601,"model":"base","parts":[{"type":"text","text":"A striped cat."}]},
                 {"id":"m3","author":"user","created_at":1746093700,"parts":[{"type":"text","text":"Older?"}]},
                 {"id":"m4","author":"assistant","state":"interrupted","notice":"stopped","created_at":1746093701,"parts":[{"type":"text","text":"It"}]}
               ]},
              {"id":"conv-b","title":"Empty","created_at":1700000000,"messages":[]}\(extraConversation)
            ]}
            """
        try json.write(toFile: directory + "/conversations.json", atomically: true, encoding: .utf8)
        return (directory, image)
    }

    private func snapshot(_ directory: String) throws -> [String: Data] {
        var files: [String: Data] = [:]
        for name in FileManager.default.enumerator(atPath: directory)?.allObjects as? [String] ?? [] {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: directory + "/" + name, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[name] = FileManager.default.contents(atPath: directory + "/" + name)
            }
        }
        return files
    }

    @Test func roundTripPreservesIdsOrderDraftsStatesAndImageBytes() throws {
        let (archive, image) = try makeArchive()
        let before = try snapshot(archive)
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        let outcome = try ArchiveImporter(store: store).importArchive(at: archive)
        #expect(outcome == .init(conversations: 2, messages: 4, images: 1, alreadyImported: false))
        let conversation = try #require(try store.conversation(id: "conv-a"))
        #expect(conversation.title == "Cats" && conversation.draft == "and dogs?" && conversation.messageCount == 4)
        #expect(conversation.updatedAt == 1_746_180_000_250)
        let messages = try store.messages(conversationID: "conv-a")
        #expect(messages.map(\.id) == ["m1", "m2", "m3", "m4"])
        #expect(messages.map(\.state) == [.complete, .complete, .complete, .interrupted])
        #expect(messages[1].model == "base" && messages[3].notice == "stopped")
        let reference = try #require(messages[0].images.first)
        #expect(reference.width == 20 && reference.height == 10)
        #expect(try store.imageBytes(reference) == image)
        #expect(try store.search("striped").first?.conversationID == "conv-a")
        #expect(try snapshot(archive) == before)  // the source is never modified

        // Idempotent: the marker makes the second import a no-op.
        let again = try ArchiveImporter(store: store).importArchive(at: archive)
        #expect(again.alreadyImported)
        #expect(try store.conversationCount() == 2)
    }

    @Test func missingImageRollsBackEverythingAndExplains() throws {
        let (archive, _) = try makeArchive(missingImage: true)
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        let error = try #require(throws: HistoryError.self) { try ArchiveImporter(store: store).importArchive(at: archive) }
        #expect(error.message.contains("Images/cat.png is missing"))
        #expect(error.message.contains("conversations[0].messages[0].parts[1]"))
        #expect(try store.conversationCount() == 0)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM imports") == 0)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM messages") == 0)
    }

    @Test func invalidArchiveRollsBackAfterPartialWork() throws {
        // The first conversation (with its image) is valid; the third is broken: nothing at all may remain.
        let (archive, _) = try makeArchive(extraConversation: #",{"id":"conv-c","created_at":"yesterday"}"#)
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        let error = try #require(throws: HistoryError.self) { try ArchiveImporter(store: store).importArchive(at: archive) }
        #expect(error.message.contains("conversations[2].created_at"))
        #expect(try store.conversationCount() == 0)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM images") == 0)
        #expect((try FileManager.default.contentsOfDirectory(atPath: store.images.directory)).isEmpty)
    }

    @Test func aFailedImportOnADamagedDatabaseRemovesNoStoredImage() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        let store = try HistoryStore(directory: directory)
        let bytes = try TestImages.png(width: 12, height: 12)
        let image = try store.storeImage(bytes, mimeType: "image/png", width: 12, height: 12)
        let conversation = try store.createConversation()
        _ = try store.beginTurn(conversationID: conversation.id, userParts: [.image(image)], model: nil)
        let file = store.images.path(hash: image.hash, mimeType: image.mimeType)

        // Damage the pages of the images table and its index (a bad disk, a broken copy) behind the open store;
        // another connection's write makes the store read them again.
        let other = try Connection(path: directory + "/history.sqlite")
        let pages = try other.query("SELECT rootpage FROM sqlite_master WHERE tbl_name = 'images'") { $0.integer(0) }
        let pageSize = try #require(try other.scalarInteger("PRAGMA page_size"))
        try other.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: directory + "/history.sqlite"))
        for page in pages {
            try handle.seek(toOffset: UInt64((page - 1) * pageSize))
            handle.write(Data(repeating: 0xFF, count: Int(pageSize)))
        }
        try handle.close()
        try other.execute("INSERT INTO app_state(key, value) VALUES ('touch', 'x')")

        let (archive, _) = try makeArchive()
        #expect(throws: (any Error).self) { try ArchiveImporter(store: store).importArchive(at: archive) }
        // The rows could not be read, so nothing may be taken for unreferenced: the stored image stays.
        #expect(FileManager.default.fileExists(atPath: file))
    }

    @Test func anOutOfRangeTimestampIsAnErrorNotACrash() throws {
        let (archive, _) = try makeArchive(extraConversation: #",{"id":"conv-c","created_at":1e17}"#)
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        let error = try #require(throws: HistoryError.self) { try ArchiveImporter(store: store).importArchive(at: archive) }
        #expect(error.message.contains("conversations[2].created_at"))
        #expect(error.message.contains("out of range"))
        #expect(try store.conversationCount() == 0)
    }

    /// An archive's title obeys the history's bound (cut, so an archive from before the bound still imports): before,
    /// the raw INSERT stored a title of any length.
    @Test func anArchivedTitleIsCutToTheHistorysBound() throws {
        let long = String(repeating: "t", count: 5_000)
        let (archive, _) = try makeArchive(extraConversation: #",{"id":"conv-c","created_at":1,"title":"\#(long)"}"#)
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        _ = try ArchiveImporter(store: store).importArchive(at: archive)
        let title = try #require(try store.conversation(id: "conv-c")).title
        #expect(title.unicodeScalars.count == HistoryStore.maximumTitleCharacters)
    }

    @Test func aClashingMessageIDNamesItsPath() throws {
        let (archive, _) = try makeArchive(
            extraConversation: #",{"id":"conv-c","created_at":1,"messages":[{"id":"x1","author":"user","created_at":1},{"id":"m2","author":"user","created_at":1}]}"#)
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        let error = try #require(throws: HistoryError.self) { try ArchiveImporter(store: store).importArchive(at: archive) }
        #expect(error.message.contains("conversations[2].messages[1].id"))
        #expect(error.message.contains("m2 already exists"))
        #expect(try store.conversationCount() == 0)
        #expect((try FileManager.default.contentsOfDirectory(atPath: store.images.directory)).isEmpty)
    }

    @Test func notAnArchiveIsExplained() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-archive")
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-history"))
        #expect(throws: HistoryError.self) { try ArchiveImporter(store: store).importArchive(at: directory) }
        try #"{"format":"other"}"#.write(toFile: directory + "/conversations.json", atomically: true, encoding: .utf8)
        let error = try #require(throws: HistoryError.self) { try ArchiveImporter(store: store).importArchive(at: directory) }
        #expect(error.message.contains("afm-chat-archive"))
    }
}
