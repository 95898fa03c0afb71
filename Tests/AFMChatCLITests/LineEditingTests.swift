// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

/// The prompt of `afm chat` in a real pseudo-terminal (tmux) against a real afmd with the scripted backend: line
/// editing keys, input history per conversation kept in the history database, Ctrl-R, multi-line input and pastes.
@Suite(.serialized) struct LineEditingTests {
    /// Answers with the question after "echo: ".
    static let echo = #"{"capabilities":{"streaming":true,"tools":false,"vision":false,"reasoning":false},"steps":[{"text":"echo: "},{"echo":true}]}"#

    private func start(_ harness: ChatHarness, width: Int = 120) throws -> TmuxPane {
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory], width: width)
        #expect(pane.waitFor("/help for commands"))
        return pane
    }

    /// The texts of the stored user messages, oldest first.
    private func questions(_ harness: ChatHarness) throws -> [String] {
        let store = try HistoryStore(directory: harness.dataDirectory)
        return try store.connection.query(
            "SELECT p.text FROM parts p JOIN messages m ON m.id = p.message_id WHERE m.author = 'user' AND p.kind = 'text' ORDER BY m.created_at, m.sequence"
        ) { $0.text(0) }
    }

    @Test func arrowsHomeEndAndWordMovesEditTheLine() throws {
        let harness = try ChatHarness(models: ["m": Self.echo])
        let pane = try start(harness)
        try pane.type("brown fox")
        try pane.press("Home")
        try pane.type("quick ")
        try pane.press("End")
        try pane.type(" jumps")
        try pane.press("C-Left", "C-Left")  // before "fox"
        try pane.type("lazy ")
        try pane.press("M-b", "M-b", "M-b")  // to the start (Alt-B: a word back, three times)
        try pane.type("the ")
        try pane.press("Left", "Left", "Left", "Left", "Right")  // inside "the ": between "t" and "h"
        try pane.press("BSpace")  // deletes "t"
        try pane.type("T")
        try pane.press("M-f")  // to the end of "The"
        try pane.press("C-e")
        try pane.press("C-w")  // deletes "jumps"
        try pane.type("runs")
        try pane.press("Enter")
        #expect(pane.waitFor("echo: The quick brown lazy fox runs"), "\(pane.screen())")
        #expect(try questions(harness) == ["The quick brown lazy fox runs"])
    }

    @Test func historyRecallIsPerConversationAndKeptInTheDatabase() throws {
        let harness = try ChatHarness(models: ["m": Self.echo])
        do {
            let pane = try start(harness)
            try pane.line("first question")
            #expect(pane.waitFor("echo: first question"))
            try pane.line("second question")
            #expect(pane.waitFor("echo: second question"))
            try pane.press("Up")
            #expect(pane.waitFor("you> second question", count: 2))
            try pane.press("Up")
            #expect(pane.waitFor("you> first question", count: 2))
            try pane.press("Down")
            #expect(pane.waitFor("you> second question", count: 2))
            try pane.press("Up", "Enter")
            #expect(pane.waitFor("echo: first question", count: 2))
        }
        let store = try HistoryStore(directory: harness.dataDirectory)
        let conversation = try #require(try store.listConversations().first)
        #expect(try store.inputHistory(conversationID: conversation.id) == ["first question", "second question", "first question"])

        // Another conversation has its own inputs; the first one's come back when it is opened again, after a restart.
        let pane = try start(harness)
        try pane.line("/new")
        #expect(pane.waitFor("new conversation"))
        try pane.line("other topic")
        #expect(pane.waitFor("echo: other topic"))
        try pane.press("Up", "Up")  // only "other topic" here (the /new was typed in the first conversation)
        try pane.type(" again")
        try pane.press("Enter")
        #expect(pane.waitFor("echo: other topic again"))
        try pane.line("/open \(conversation.id.prefix(8))")
        #expect(pane.waitFor("(\(conversation.id.prefix(8)), 6 messages)"))
        try pane.press("Up")
        #expect(pane.waitFor("you> /new", count: 2))
        try pane.press("Up")
        #expect(pane.waitFor("you> first question", count: 3))
        #expect(try questions(harness) == ["first question", "second question", "first question", "other topic", "other topic again"])
    }

    @Test func ctrlRSearchesEarlierInputs() throws {
        let harness = try ChatHarness(models: ["m": Self.echo])
        let pane = try start(harness)
        for question in ["alpha one", "beta two", "gamma three"] {
            try pane.line(question)
            #expect(pane.waitFor("echo: \(question)"))
        }
        try pane.press("C-r")
        try pane.type("bet")
        #expect(pane.waitFor("(search) bet: beta two"))
        try pane.press("Enter")
        #expect(pane.waitFor("echo: beta two", count: 2))
        // Esc keeps the match on the line for editing; Ctrl-G puts the line back.
        try pane.type("draft")
        try pane.press("C-r")
        try pane.type("alp")
        #expect(pane.waitFor("(search) alp: alpha one"))
        try pane.press("C-g")
        try pane.press("C-r")
        try pane.type("gam")
        #expect(pane.waitFor("(search) gam: gamma three"))
        try pane.press("Escape")
        try pane.type(" edited")
        try pane.press("Enter")
        #expect(pane.waitFor("echo: gamma three edited"))
        #expect(try questions(harness).suffix(2) == ["beta two", "gamma three edited"])
    }

    @Test func multiLineInputAndALongPasteSendOneMessageEach() throws {
        let harness = try ChatHarness(models: ["m": Self.echo])
        let pane = try start(harness)
        try pane.type("line one")
        try pane.press("M-Enter")  // Alt-Enter: a line break
        try pane.type("line two")
        try pane.press("C-j")  // Ctrl-J: a line break too
        try pane.type("line three")
        try pane.press("Up")  // inside the message: to "line two"
        try pane.press("End")
        try pane.type("!")
        try pane.press("Enter")
        #expect(pane.waitFor("line three"))
        #expect(waitUntil(seconds: 15) { (try? questions(harness))?.count == 1 })
        #expect(try questions(harness) == ["line one\nline two!\nline three"])

        // A bracketed paste of 200 lines (about 9 KB): its line breaks do not send it; Enter sends it whole.
        let pasted = (1...200).map { "pasted line \($0) with some words" }.joined(separator: "\n")
        try pane.tmux(["set-buffer", "-b", "long", pasted])
        try pane.tmux(["paste-buffer", "-p", "-b", "long", "-t", pane.session])
        try pane.type(" end")
        #expect(waitUntil(seconds: 15) { pane.screen().contains("pasted line 200 with some words end") })
        usleep(300_000)
        #expect(try questions(harness).count == 1, "the paste was sent early")
        try pane.press("Enter")
        #expect(waitUntil(seconds: 20) { (try? questions(harness))?.count == 2 })
        #expect(try questions(harness).last == pasted + " end")
    }
}
