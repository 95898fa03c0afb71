// SPDX-License-Identifier: Apache-2.0
import AFMChat
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

    @Test func sha256MatchesFIPSVectors() {
        #expect(SHA256.hexDigest(Array("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256.hexDigest([]) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(
            SHA256.hexDigest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }
}
