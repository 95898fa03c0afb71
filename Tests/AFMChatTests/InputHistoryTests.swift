// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMChat
import AFMStore
import AFMTestSupport
import Testing

/// What the terminal chat recalls with Up/Down and Ctrl-R (schema version 4), and the token usage of answers.
@Suite struct InputHistoryTests {
    @Test func inputsArePerConversationDeduplicatedBoundedAndDeletedWithTheirConversation() throws {
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-inputs"))
        let first = try store.createConversation()
        let second = try store.createConversation()
        try store.recordInput("hello", conversationID: first.id)
        try store.recordInput("hello", conversationID: first.id)  // the same line twice in a row: kept once
        try store.recordInput("  ", conversationID: first.id)  // blank: not kept
        try store.recordInput("line one\nline two", conversationID: first.id)
        try store.recordInput("/list", conversationID: nil)
        try store.recordInput("other", conversationID: second.id)
        #expect(try store.inputHistory(conversationID: first.id) == ["hello", "line one\nline two"])
        #expect(try store.inputHistory(conversationID: second.id) == ["other"])
        // With no conversation open: the newest inputs of all of them.
        #expect(try store.inputHistory(conversationID: nil) == ["hello", "line one\nline two", "/list", "other"])
        #expect(try store.inputHistory(conversationID: nil, limit: 2) == ["/list", "other"])

        for index in 0..<(HistoryStore.inputHistoryLimit + 5) { try store.recordInput("input \(index)", conversationID: second.id) }
        let kept = try store.inputHistory(conversationID: second.id)
        #expect(kept.count == HistoryStore.inputHistoryLimit)
        #expect(kept.last == "input \(HistoryStore.inputHistoryLimit + 4)" && kept.first == "input 5")

        try store.delete(conversationID: second.id)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM input_history WHERE conversation_id = ?", [.text(second.id)]) == 0)
        #expect(try store.inputHistory(conversationID: first.id).count == 2)
    }

    @Test func answersKeepTheirResponseUsage() throws {
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-usage"))
        let conversation = try store.createConversation()
        let (_, answer) = try store.beginTurn(conversationID: conversation.id, userParts: [.text("q")], model: "m")
        #expect(try store.messages(conversationID: conversation.id).last?.usage == nil)
        try store.finishAnswer(
            messageID: answer.id, text: "a", state: .complete, model: "m", notice: nil, usage: ResponseUsage(inputTokens: 12, outputTokens: 3))
        #expect(try store.messages(conversationID: conversation.id).last?.usage == ResponseUsage(inputTokens: 12, outputTokens: 3))
    }

    @Test func searchSnippetsTakeTheCallersMarkers() throws {
        let store = try HistoryStore(directory: TestPaths.makeTemporaryDirectory("afm-markers"))
        let conversation = try store.createConversation(title: "notes")
        try store.appendMessage(conversationID: conversation.id, author: .user, state: .complete, parts: [.text("the zebra crossing [really]")])
        let hit = try #require(try store.search("zebra", markers: ("\u{E000}", "\u{E001}")).first)
        #expect(hit.snippet == "the \u{E000}zebra\u{E001} crossing [really]")
        #expect(try store.search("zebra").first?.snippet == "the [zebra] crossing [really]")
    }
}
