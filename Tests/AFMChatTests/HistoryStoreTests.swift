// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMCore
import AFMStore
import AFMTestSupport
import Foundation
import Testing

@Suite struct HistoryStoreTests {
    private func makeStore(_ directory: String = TestPaths.makeTemporaryDirectory("afm-history")) throws -> HistoryStore {
        try HistoryStore(directory: directory)
    }

    @Test func turnsKeepOrderCountersPreviewAndTitle() throws {
        let store = try makeStore()
        let conversation = try store.createConversation()
        let (user, answer) = try store.beginTurn(conversationID: conversation.id, userParts: [.text("What is WAL?")], model: "m")
        #expect(user.sequence == 0 && answer.sequence == 1 && answer.state == .pending)
        try store.finishAnswer(messageID: answer.id, text: "Write-ahead logging.", state: .complete, model: "m-actual", notice: nil)
        let summary = try #require(try store.conversation(id: conversation.id))
        #expect(summary.title == "What is WAL?")
        #expect(summary.messageCount == 2 && summary.nextSequence == 2)
        #expect(summary.preview == "Write-ahead logging.")
        let messages = try store.messages(conversationID: conversation.id)
        #expect(messages.map(\.text) == ["What is WAL?", "Write-ahead logging."])
        #expect(messages[1].model == "m-actual" && messages[1].state == .complete)
    }

    /// The title bound counts Unicode scalars: one grapheme cluster of 100,000 combining marks (200,001 UTF-8 bytes)
    /// counted as one character and passed; auto-titles and previews were cut by grapheme the same way.
    @Test func titlesAndPreviewsAreBoundedInScalarsNotGraphemes() throws {
        let store = try makeStore()
        let conversation = try store.createConversation()
        let heavy = "a" + String(repeating: "\u{301}", count: 100_000)
        #expect(heavy.count == 1)
        #expect(throws: HistoryError.self) { try store.rename(conversationID: conversation.id, to: heavy) }
        #expect(throws: HistoryError.self) { try store.createConversation(title: heavy) }
        let (_, answer) = try store.beginTurn(conversationID: conversation.id, userParts: [.text(heavy)], model: "m")
        try store.finishAnswer(messageID: answer.id, text: heavy, state: .complete, model: "m", notice: nil)
        let summary = try #require(try store.conversation(id: conversation.id))
        #expect(summary.title.unicodeScalars.count <= 60)
        #expect(summary.preview.unicodeScalars.count <= 100)
    }

    @Test func pendingAnswersReopenAsInterrupted() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        var answerID = ""
        do {
            let store = try makeStore(directory)
            let conversation = try store.createConversation()
            answerID = try store.beginTurn(conversationID: conversation.id, userParts: [.text("hi")], model: nil).answer.id
            try store.updateAnswer(messageID: answerID, text: "partial")
        }
        let store = try makeStore(directory)
        #expect(store.reopenedPendingCount == 1)
        let state = try store.connection.scalarText("SELECT state FROM messages WHERE id = ?", [.text(answerID)])
        #expect(state == "interrupted")
        #expect(try store.connection.scalarText("SELECT text FROM parts WHERE message_id = ?", [.text(answerID)]) == "partial")
    }

    @Test func searchFindsTitlesAndMessageTextByWordPrefix() throws {
        let store = try makeStore()
        let a = try store.createConversation(title: "Holiday plans")
        try store.appendMessage(conversationID: a.id, author: .user, state: .complete, parts: [.text("Pack the sunscreen")])
        let b = try store.createConversation(title: "Databases")
        try store.appendMessage(conversationID: b.id, author: .assistant, state: .complete, parts: [.text("SQLite uses write-ahead logging")])
        #expect(try store.search("holiday").map(\.conversationID) == [a.id])
        let hits = try store.search("sunscr")
        #expect(hits.count == 1 && hits[0].conversationID == a.id && hits[0].snippet.contains("[sunscreen]"))
        #expect(try store.search("write ahead").map(\.conversationID) == [b.id])
        #expect(try store.search("\"quote").isEmpty)  // user text never breaks the FTS syntax
        try store.delete(conversationID: b.id)
        #expect(try store.search("logging").isEmpty)  // the index follows cascaded deletes
    }

    @Test func deleteCascadesAndImagesGoWithTheirLastMessage() throws {
        let store = try makeStore()
        let bytes = try TestImages.png(width: 8, height: 8)
        let image = try store.storeImage(bytes, mimeType: "image/png", width: 8, height: 8)
        let a = try store.createConversation()
        let b = try store.createConversation()
        try store.appendMessage(conversationID: a.id, author: .user, state: .complete, parts: [.text("look"), .image(image)])
        try store.appendMessage(conversationID: b.id, author: .user, state: .complete, parts: [.image(image)])
        let file = store.images.path(hash: image.hash, mimeType: "image/png")
        #expect(try store.imageBytes(image) == bytes)
        try store.delete(conversationID: a.id)
        #expect(FileManager.default.fileExists(atPath: file))  // still used by b
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM messages WHERE conversation_id = ?", [.text(a.id)]) == 0)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM parts") == 1)
        try store.delete(conversationID: b.id)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM images") == 0)
        #expect(try store.connection.integrityCheck() == "ok")
    }

    @Test func listAndMessagesPaginate() throws {
        let store = try makeStore()
        var ids: [String] = []
        for index in 0..<120 {
            let conversation = try store.createConversation(title: "c\(index)")
            try store.connection.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", [.integer(Int64(index)), .text(conversation.id)])
            ids.append(conversation.id)
        }
        let first = try store.listConversations(limit: 50, offset: 0)
        let third = try store.listConversations(limit: 50, offset: 100)
        #expect(first.count == 50 && first[0].title == "c119" && third.count == 20 && third.last?.title == "c0")
        for index in 0..<130 {
            try store.appendMessage(conversationID: ids[0], author: index % 2 == 0 ? .user : .assistant, state: .complete, parts: [.text("m\(index)")])
        }
        let last = try store.messages(conversationID: ids[0], limit: 60)
        #expect(last.first?.text == "m70" && last.last?.text == "m129")
        let earlier = try store.messages(conversationID: ids[0], before: last[0].sequence, limit: 60)
        #expect(earlier.first?.text == "m10" && earlier.last?.text == "m69")
    }

    @Test func draftsAreKeptPerConversationAndLoose() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        let id: String
        do {
            let store = try makeStore(directory)
            id = try store.createConversation().id
            try store.saveDraft("half a thought", conversationID: id)
            try store.saveDraft("loose", conversationID: nil)
        }
        let store = try makeStore(directory)
        #expect(try store.draft(conversationID: id) == "half a thought")
        #expect(try store.draft(conversationID: nil) == "loose")
    }

    // MARK: - Several processes on one history (issue #24, item 6)

    @Test func aPendingAnswerOfARunningStoreIsLeftAlone() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        var streaming: HistoryStore? = try makeStore(directory)
        let conversation = try #require(streaming).createConversation()
        let answer = try #require(streaming).beginTurn(conversationID: conversation.id, userParts: [.text("hi")], model: nil).answer
        // A second client opens the same history while the first still streams the answer.
        let second = try makeStore(directory)
        #expect(second.reopenedPendingCount == 0)
        #expect(try second.connection.scalarText("SELECT state FROM messages WHERE id = ?", [.text(answer.id)]) == "pending")
        try #require(streaming).finishAnswer(messageID: answer.id, text: "done", state: .complete, model: nil, notice: nil)
        // Once the streaming store is gone, its unfinished answer is an orphan: the next open interrupts it.
        let next = try #require(streaming).beginTurn(conversationID: conversation.id, userParts: [.text("again")], model: nil).answer
        streaming = nil
        let third = try makeStore(directory)
        #expect(third.reopenedPendingCount == 1)
        #expect(try third.connection.scalarText("SELECT state FROM messages WHERE id = ?", [.text(next.id)]) == "interrupted")
        #expect(try third.connection.scalarText("SELECT state FROM messages WHERE id = ?", [.text(answer.id)]) == "complete")
    }

    @Test func deleteKeepsAnImageAnotherStoreHasNotSentYet() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        let sender = try makeStore(directory)
        let other = try makeStore(directory)
        let bytes = try TestImages.png(width: 8, height: 8)
        let image = try sender.storeImage(bytes, mimeType: "image/png", width: 8, height: 8)
        // Meanwhile another client deletes a conversation, which removes unreferenced images.
        try other.delete(conversationID: try other.createConversation().id)
        let conversation = try sender.createConversation()
        _ = try sender.beginTurn(conversationID: conversation.id, userParts: [.text("look"), .image(image)], model: nil)
        #expect(try sender.imageBytes(image) == bytes)
        #expect(try other.connection.scalarInteger("SELECT count(*) FROM image_holds") == 0)  // linked: no hold left
        #expect(try other.connection.integrityCheck() == "ok")
    }

    @Test func anUnsentImageOfAStoppedStoreIsRemovedAtTheNextOpen() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        var sender: HistoryStore? = try makeStore(directory)
        let image = try #require(sender).storeImage(try TestImages.png(width: 8, height: 8), mimeType: "image/png", width: 8, height: 8)
        let file = try #require(sender).images.path(hash: image.hash, mimeType: image.mimeType)
        sender = nil
        let store = try makeStore(directory)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM images") == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
    }

    @Test func theSweepLeavesAnotherWritersFilesAlone() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        _ = try makeStore(directory)
        // Another process writing an image holds images.lock shared from its file write until its row commits.
        let writer = open(directory + "/images.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(writer >= 0 && flock(writer, LOCK_SH) == 0)
        let hash = String(repeating: "ab", count: 32)
        let temporary = directory + "/images/." + hash + ".png.tmp-99999-1"
        let written = directory + "/images/" + hash + ".png"
        for path in [temporary, written] { try Data([1, 2, 3]).write(to: URL(fileURLWithPath: path)) }
        _ = try makeStore(directory)
        #expect(FileManager.default.fileExists(atPath: temporary))
        #expect(FileManager.default.fileExists(atPath: written))
        close(writer)  // the writer crashed: now both files are leftovers
        _ = try makeStore(directory)
        #expect(!FileManager.default.fileExists(atPath: temporary))
        #expect(!FileManager.default.fileExists(atPath: written))
    }

    @Test func leaseFilesOfEndedStoresAreRemovedAndLiveOnesKept() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        let live = try makeStore(directory)
        _ = try live.beginTurn(conversationID: try live.createConversation().id, userParts: [.text("hi")], model: nil)
        let liveLease = directory + "/leases/" + live.owner + ".lock"
        let staleLease = directory + "/leases/" + UUID().uuidString.lowercased() + ".lock"  // a killed store's
        try Data().write(to: URL(fileURLWithPath: staleLease))
        for path in [liveLease, staleLease] {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
        }
        let other = try makeStore(directory)
        #expect(!FileManager.default.fileExists(atPath: staleLease))
        #expect(FileManager.default.fileExists(atPath: liveLease))
        #expect(other.reopenedPendingCount == 0)
    }

    @Test func aLeaseFileThatCannotBeOpenedCountsAsRunning() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        let live = try makeStore(directory)
        let answer = try live.beginTurn(conversationID: try live.createConversation().id, userParts: [.text("hi")], model: nil).answer
        // open(2) of the lease fails with EISDIR, not ENOENT (mode 000 would not stop root); EMFILE or EACCES
        // are alike: only a missing file may mean the store stopped.
        let lease = directory + "/leases/" + live.owner + ".lock"
        try FileManager.default.removeItem(atPath: lease)
        try FileManager.default.createDirectory(atPath: lease, withIntermediateDirectories: false)
        let other = try makeStore(directory)
        #expect(other.reopenedPendingCount == 0)
        #expect(try other.connection.scalarText("SELECT state FROM messages WHERE id = ?", [.text(answer.id)]) == "pending")
    }

    @Test func aDraftOfAConversationAnotherStoreDeletedIsNotSavedSilently() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        let first = try makeStore(directory)
        let second = try makeStore(directory)
        let conversation = try first.createConversation()
        try first.saveDraft("before", conversationID: conversation.id)
        try second.delete(conversationID: conversation.id)
        #expect(throws: HistoryError("no conversation \(conversation.id)")) {
            try first.saveDraft("typed after the delete", conversationID: conversation.id)
        }
        #expect(throws: HistoryError("no conversation \(conversation.id)")) { try first.saveDraft("", conversationID: conversation.id) }
    }

    // MARK: - Opening during another write (item 8)

    @Test func openingWhileAnotherConnectionWritesDoesNotWaitForItsLock() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        do {
            let store = try makeStore(directory)
            let conversation = try store.createConversation()
            let answer = try store.beginTurn(conversationID: conversation.id, userParts: [.text("hi")], model: nil).answer
            try store.updateAnswer(messageID: answer.id, text: "half")
        }
        // The orphaned pending answer is interrupted by the first open; the second finds nothing to change.
        _ = try makeStore(directory)
        let importer = try Connection(path: directory + "/history.sqlite")
        try importer.transaction {
            try importer.execute("INSERT INTO app_state(key, value) VALUES ('long', 'write')")
            let start = Date()
            let store = try makeStore(directory)
            #expect(Date().timeIntervalSince(start) < 2)
            #expect(try store.conversationCount() == 1)
        }
    }

    // MARK: - Search index keyed by parts.id (item 9)

    /// A history written by schema version 1 (implicit rowids) with gaps in them.
    private func makeVersionOneHistory(_ directory: String) throws {
        let connection = try Connection(path: directory + "/history.sqlite")
        try connection.migrate([HistorySchema.migrations[0]])
        try connection.executeScript(
            """
            INSERT INTO conversations(id, title, created_at, updated_at, next_sequence, message_count) VALUES
                ('conv-a', 'A', 1, 1, 3, 3), ('conv-b', 'B', 2, 2, 1, 1);
            INSERT INTO messages(id, conversation_id, sequence, author, state, created_at) VALUES
                ('a0', 'conv-a', 0, 'user', 'complete', 1), ('a1', 'conv-a', 1, 'assistant', 'complete', 1),
                ('a2', 'conv-a', 2, 'user', 'complete', 1), ('b0', 'conv-b', 0, 'user', 'complete', 2);
            INSERT INTO parts(message_id, position, kind, text) VALUES
                ('a0', 0, 'text', 'apples'), ('a1', 0, 'text', 'bananas'), ('a2', 0, 'text', 'cherries'),
                ('b0', 0, 'text', 'zebra crossing');
            DELETE FROM messages WHERE id IN ('a0', 'a1');
            """
        )
    }

    private func searchIndexCheck(_ store: HistoryStore) throws {
        try store.connection.execute("INSERT INTO parts_fts(parts_fts, rank) VALUES ('integrity-check', 1)")
    }

    @Test func aVersionOneHistoryIsMigratedAndItsSearchSurvivesADumpAndRestore() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        try makeVersionOneHistory(directory)
        let store = try makeStore(directory)
        #expect(try store.search("zebra").map(\.conversationID) == ["conv-b"])

        // A backup by `.dump`, restored into a new file, renumbers implicit rowids (the index must not use them).
        try store.connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        let restored = TestPaths.makeTemporaryDirectory("afm-history")
        let shell = Process()
        shell.executableURL = URL(fileURLWithPath: "/bin/sh")
        shell.arguments = ["-c", "sqlite3 \"$0/history.sqlite\" .dump | sqlite3 \"$1/history.sqlite\"", directory, restored]
        try shell.run()
        shell.waitUntilExit()
        try #require(shell.terminationStatus == 0)
        let copy = try makeStore(restored)
        #expect(try copy.search("zebra").map(\.conversationID) == ["conv-b"])
        #expect(try copy.search("cherries").map(\.conversationID) == ["conv-a"])
        #expect(throws: Never.self) { try searchIndexCheck(copy) }

        // The migration kept the version-1 rowids as parts.id; the index checks out, before and after VACUUM.
        #expect(try store.connection.query("SELECT id, text FROM parts ORDER BY id") { "\($0.integer(0)):\($0.text(1))" } == ["3:cherries", "4:zebra crossing"])
        try searchIndexCheck(store)
        #expect(try store.connection.integrityCheck() == "ok")
        try store.connection.execute("VACUUM")
        try searchIndexCheck(store)
        #expect(try store.search("cherries").map(\.conversationID) == ["conv-a"])
    }

    @Test func aVersionOneHistoryWithOrphanRowsIsMigrated() throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-history")
        do {
            let connection = try Connection(path: directory + "/history.sqlite")
            try connection.migrate([HistorySchema.migrations[0]])
            // Rows left behind by a tool that deletes with foreign keys off (the sqlite3 shell's default), or by
            // a `.recover`: parts of a deleted message, a message of a deleted conversation, a missing image.
            try connection.executeScript(
                """
                PRAGMA foreign_keys=OFF;
                INSERT INTO conversations(id, title, created_at, updated_at, next_sequence, message_count) VALUES
                    ('conv', 'C', 1, 1, 2, 2), ('gone', 'G', 1, 1, 1, 1);
                INSERT INTO messages(id, conversation_id, sequence, author, state, created_at) VALUES
                    ('m0', 'conv', 0, 'user', 'complete', 1), ('m1', 'conv', 1, 'assistant', 'complete', 1),
                    ('g0', 'gone', 0, 'user', 'complete', 1);
                INSERT INTO parts(message_id, position, kind, text) VALUES
                    ('m0', 0, 'text', 'orphaned words'), ('m1', 0, 'text', 'kept words'), ('g0', 0, 'text', 'ghost words');
                INSERT INTO parts(message_id, position, kind, image_hash) VALUES ('m1', 1, 'image', 'no-such-image');
                DELETE FROM messages WHERE id = 'm0';
                DELETE FROM conversations WHERE id = 'gone';
                """
            )
            try #require(try connection.query("PRAGMA foreign_key_check") { $0.text(0) }.count == 3)
        }
        let store = try makeStore(directory)
        #expect(try store.connection.schemaVersion() == 4)
        #expect(try store.connection.query("SELECT message_id || ':' || coalesce(text, image_hash) FROM parts") { $0.text(0) } == ["m1:kept words"])
        #expect(try store.connection.query("SELECT id FROM messages") { $0.text(0) } == ["m1"])
        #expect(try store.connection.query("PRAGMA foreign_key_check") { $0.text(0) }.isEmpty)
        #expect(try store.search("words").map(\.conversationID) == ["conv"])
        try searchIndexCheck(store)
        #expect(try makeStore(directory).conversationCount() == 1)  // and it opens again
    }

    @Test func sha256MatchesFIPSVectors() {
        #expect(SHA256.hexDigest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            SHA256.hexDigest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }
}
