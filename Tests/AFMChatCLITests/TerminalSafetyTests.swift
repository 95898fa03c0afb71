// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

/// A model whose answer carries terminal control sequences, shown by `afm chat` in a real pseudo-terminal (tmux):
/// nothing of them reaches the terminal; they are shown escaped (`\x1b`), in the streamed answer, `/copy`, `/open`,
/// `/search` and the error notice.
@Suite(.serialized) struct TerminalSafetyTests {
    /// OSC 0 (window title), DSR (`ESC[6n`, which makes the terminal answer on standard input), OSC 52 (clipboard),
    /// OSC 8 (hyperlink), a C1 CSI (U+009B) and a screen clear; then an error whose message has its own escapes.
    static let hostile = #"{"capabilities":{"streaming":true,"tools":false,"vision":false,"reasoning":false},"steps":["#
        + #"{"text":"zebra \u001b]0;PWNED-TITLE\u0007 ask \u001b[6n clip \u001b]52;c;cHduZWQ=\u0007 "},"#
        + #"{"text":"link \u001b]8;;http://evil.example/\u001b\\here\u001b]8;;\u001b\\ c1 \u009b2J "},"#
        + #"{"text":"clear \u001b[2J\u001b[H\nline two\ttabbed\n"},"#
        + #"{"error":{"code":"model_unavailable","message":"upstream \u001b]0;NOTICE-TITLE\u0007 broke"}}]}"#

    @Test func modelOutputNeverDrivesTheTerminal() throws {
        let harness = try ChatHarness(models: ["evil": Self.hostile])
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("hello")
        #expect(pane.waitFor("/retry to ask again"))
        // Time for a terminal's answer to ESC[6n to arrive on afm's standard input, if one was asked for.
        usleep(500_000)
        try pane.line("/copy")
        #expect(pane.waitFor("(copied to the clipboard", seconds: 10))
        try pane.line("/search zebra")
        #expect(pane.waitFor("match(es)"))
        let store = try HistoryStore(directory: harness.dataDirectory)
        let id = try #require(try store.listConversations(limit: 1, offset: 0).first?.id)
        try pane.line("/open \(id.prefix(8))")
        #expect(pane.waitFor("messages)\n"))
        #expect(pane.waitFor(#"\x1b]0;PWNED-TITLE\x07"#, count: 3))  // the answer, /copy, /open

        let screen = pane.screen()
        let title = (try? pane.tmux(["display-message", "-p", "-t", pane.session, "#{pane_title}"])) ?? ""
        #expect(!title.contains("PWNED") && !title.contains("NOTICE"), "the model retitled the terminal: \(title)")
        #expect(screen.contains(#"ask \x1b[6n clip \x1b]52;c;cHduZWQ=\x07"#))
        #expect(screen.contains(#"link \x1b]8;;http://evil.example/\x1b\here\x1b]8;;\x1b\ c1 \x9b2J"#))
        #expect(screen.contains("\nline two"))
        #expect(screen.contains(#"upstream \x1b]0;NOTICE-TITLE\x07 broke"#))
        // The terminal never answered a cursor-position query, so nothing was typed ahead into the prompt.
        #expect(screen.firstMatch(of: #/\[\d+;\d+R/#) == nil, "a terminal answer was typed ahead:\n\(screen)")
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM conversations WHERE draft <> ''") == 0)
        // What is stored is the model's text as it came: only the display is neutralized.
        let stored = try store.messages(conversationID: id, limit: 10).last { $0.author == .assistant }
        #expect(stored?.text.contains("\u{1B}]0;PWNED-TITLE\u{07}") == true)
    }

    /// A draft from an imported archive (or one saved by another tool) carries OSC 0 and a cursor-position query:
    /// `/open` shows it on the prompt line escaped, the pane keeps its title, nothing is typed ahead, and the draft
    /// is kept as it was stored. A pasted C1 control (UTF-8 U+009B) is not inserted into the line at all.
    @Test func anImportedDraftNeverDrivesTheTerminal() throws {
        let harness = try ChatHarness(models: ["evil": Self.hostile])
        let archive = TestPaths.makeTemporaryDirectory("afm-archive")
        let draft = #"draft \u001b]0;DRAFT-TITLE\u0007 ask \u001b[6n c1 \u009b2J end"#
        try #"{"format":"afm-chat-archive","version":1,"conversations":[{"id":"conv-hostile","title":"Hostile","created_at":1700000000,"draft":"\#(draft)","messages":[]}]}"#
            .write(toFile: archive + "/conversations.json", atomically: true, encoding: .utf8)
        let store = try HistoryStore(directory: harness.dataDirectory)
        _ = try ArchiveImporter(store: store).importArchive(at: archive)
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("/open conv-hos")
        #expect(pane.waitFor(#"\x1b]0;DRAFT-TITLE\x07 ask \x1b[6n c1 \x9b2J end"#))
        usleep(500_000)  // time for a terminal's answer to ESC[6n, had one been asked for
        let title = (try? pane.tmux(["display-message", "-p", "-t", pane.session, "#{pane_title}"])) ?? ""
        #expect(!title.contains("DRAFT-TITLE"), "the draft retitled the terminal: \(title)")
        let screen = pane.screen()
        #expect(screen.firstMatch(of: #/\[\d+;\d+R/#) == nil, "a terminal answer was typed ahead:\n\(screen)")
        #expect(try store.draft(conversationID: "conv-hostile").contains("\u{1B}]0;DRAFT-TITLE\u{07}"))
        // A pasted C1 CSI is not inserted into the line: the saved draft gets "ZQ".
        try pane.type("Z\u{9B}Q")
        let end = Date().addingTimeInterval(10)
        var saved = ""
        while Date() < end {
            saved = try store.draft(conversationID: "conv-hostile")
            if saved.hasSuffix("Q") { break }
            usleep(50_000)
        }
        #expect(saved.hasSuffix(" end" + "ZQ"), "\(saved.debugDescription)")
    }
}
