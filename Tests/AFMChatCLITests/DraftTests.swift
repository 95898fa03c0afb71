// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

/// Drafts in an interactive `afm chat` (a tmux pane): nothing typed is lost (issue #24, item 7).
@Suite(.serialized) struct DraftTests {
    /// A gateway address where nothing listens.
    static let deadGateway = "http://127.0.0.1:1"

    @Test func aSendThatFailsBeforeTheMessageIsStoredKeepsTheLine() throws {
        let data = TestPaths.makeTemporaryDirectory("afm-drafts") + "/data"
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", Self.deadGateway, "--data-dir", data])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("precious words")
        #expect(pane.waitFor("cannot reach the gateway"))
        #expect(pane.waitFor("you> precious words", count: 2))  // back on the prompt
        let store = try HistoryStore(directory: data)
        #expect(waitUntil(seconds: 5) { (try? store.draft(conversationID: nil)) == "precious words" })
        #expect(try store.draft(conversationID: nil) == "precious words")
    }

    @Test func aSendThatFailsAfterCreatingTheConversationKeepsTheLineAsItsDraft() throws {
        let data = TestPaths.makeTemporaryDirectory("afm-drafts") + "/data"
        try FileManager.default.createDirectory(atPath: data, withIntermediateDirectories: true)
        // A regular file where the lease directory belongs: the turn fails (ENOTDIR) after the conversation exists.
        try Data().write(to: URL(fileURLWithPath: data + "/leases"))
        let pane = try TmuxPane(command: [
            ChatHarness.afm, "chat", "--url", Self.deadGateway, "--data-dir", data, "--model", "x",
        ])
        #expect(pane.waitFor("/help for commands"))
        let store = try HistoryStore(directory: data)
        try pane.type("precious words")
        #expect(waitUntil(seconds: 10) { (try? store.draft(conversationID: nil)) == "precious words" })  // saved while typing
        try pane.press("Enter")
        #expect(pane.waitFor("afm: "))
        #expect(pane.waitFor("you> precious words", count: 2), "\(pane.screen())")  // back on the prompt
        let id = try #require(try store.appState("current_conversation"))
        #expect(waitUntil(seconds: 5) { (try? store.draft(conversationID: id)) == "precious words" })
        #expect(try store.draft(conversationID: id) == "precious words", "\(pane.screen())")
    }

    @Test func aDraftOfAConversationDeletedElsewhereGoesToTheLooseDraft() throws {
        let data = TestPaths.makeTemporaryDirectory("afm-drafts") + "/data"
        let id: String
        do {
            let store = try HistoryStore(directory: data)
            id = try store.createConversation(title: "doomed").id
            try store.setAppState("current_conversation", id)
        }
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", Self.deadGateway, "--data-dir", data])
        #expect(pane.waitFor("/help for commands"))
        let store = try HistoryStore(directory: data)
        try store.delete(conversationID: id)  // another afm deletes the open conversation
        try pane.type("still mine")
        #expect(pane.waitFor("was deleted"), "\(pane.screen())")
        #expect(waitUntil(seconds: 5) { (try? store.draft(conversationID: nil)) == "still mine" })
        #expect(try store.draft(conversationID: nil) == "still mine")
    }

    @Test func newLeavesNoStaleDraftInTheConversationItLeaves() throws {
        let data = TestPaths.makeTemporaryDirectory("afm-drafts") + "/data"
        let id: String
        do {
            let store = try HistoryStore(directory: data)
            id = try store.createConversation(title: "first").id
            try store.setAppState("current_conversation", id)
        }
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", Self.deadGateway, "--data-dir", data])
        #expect(pane.waitFor("/help for commands"))
        let store = try HistoryStore(directory: data)
        try pane.type("/new")
        #expect(waitUntil(seconds: 10) { (try? store.draft(conversationID: id)) == "/new" })  // saved while typing
        try pane.press("Enter")
        #expect(pane.waitFor("new conversation"))
        #expect(waitUntil(seconds: 5) { (try? store.draft(conversationID: id)) == "" })
        #expect(try store.draft(conversationID: id) == "")
    }

    @Test func retryKeepsTheImagesAttachedForTheNextMessage() throws {
        let harness = try ChatHarness(models: ["quick": #"{"steps":[{"text":"ok"}]}"#])
        let image = harness.scratch + "/small.png"
        try Data(try SharedHistoryTests.png()).write(to: URL(fileURLWithPath: image))
        // An unknown model: every answer fails, so /retry has something to retry.
        let pane = try TmuxPane(command: [
            ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "no-such-model",
        ])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("hello")
        #expect(pane.waitFor("[failed"))
        try pane.line("/attach \(image)")
        #expect(pane.waitFor("attached small.png"))
        try pane.line("/retry")
        #expect(pane.waitFor("[failed", count: 2))
        #expect(pane.waitFor("you [1 image(s)]> ", count: 2), "\(pane.screen())")  // still attached after the retry
        let store = try HistoryStore(directory: harness.dataDirectory)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM parts WHERE kind = 'image'") == 0)  // not sent with the retry
    }
}
