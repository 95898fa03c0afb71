// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

/// `afm chat` in a real pseudo-terminal (tmux) against a real afmd with the scripted backend.
@Suite(.serialized) struct ChatTerminalTests {
    /// Three slow ticks, then the question echoed: slow enough to interrupt, quick enough to finish.
    static let slowEcho = #"{"capabilities":{"streaming":true,"tools":false,"vision":true,"reasoning":false},"steps":[{"repeat":3,"steps":[{"text":"tick "},{"delay_ms":400}]},{"text":"**echo:** "},{"echo":true}]}"#

    @Test func streamingCtrlCRetrySearchAndDraftRestore() throws {
        let harness = try ChatHarness(models: ["slow": Self.slowEcho])
        let command = [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory]
        do {
            let pane = try TmuxPane(command: command)
            #expect(pane.waitFor("/help for commands"))
            try pane.line("first zebra question")
            #expect(pane.waitFor("slow> tick"))  // streamed: the first delta is on screen before the answer ends
            #expect(!pane.screen().contains("echo:"))
            try pane.press("C-c")
            #expect(pane.waitFor("[interrupted"))
            #expect(pane.waitFor("/retry to ask again"))
            #expect(waitUntil(seconds: 15) { harness.records("terminal").contains { $0.contains(#""reason":"cancelled""#) } })
            try pane.line("/retry")
            #expect(pane.waitFor("echo: first zebra question"))
            try pane.line("/search zebra")
            #expect(pane.waitFor("match(es)"))
            try pane.type("an unsent draft")
            let store = try HistoryStore(directory: harness.dataDirectory)
            #expect(waitUntil(seconds: 15) { (try? store.connection.scalarInteger("SELECT count(*) FROM conversations WHERE draft = 'an unsent draft'")) == 1 })
            let states = try store.connection.query("SELECT state FROM messages ORDER BY sequence") { $0.text(0) }
            #expect(states == ["complete", "interrupted", "complete", "complete"])
        }
        // The interrupted turn is not sent again: the retried request holds only the question.
        let generates = harness.records("generate")
        #expect(generates.count == 2)
        #expect(generates.last.map { $0.components(separatedBy: "first zebra question").count - 1 } == 1)

        // Restart: the draft comes back on the prompt line.
        let pane = try TmuxPane(command: command)
        #expect(pane.waitFor("(draft restored)"))
        #expect(pane.waitFor("you> an unsent draft"))
        try pane.line(" and more")
        #expect(pane.waitFor("echo: an unsent draft and more"))
    }

    @Test func listPaginatesAndOpenShowsEarlierMessages() throws {
        let harness = try ChatHarness(models: ["slow": Self.slowEcho])
        do {
            let store = try HistoryStore(directory: harness.dataDirectory)
            for index in 0..<120 {
                let conversation = try store.createConversation(title: "topic \(index)", id: String(format: "conv%04d", index))
                try store.connection.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", [.integer(Int64(index) * 1000), .text(conversation.id)])
            }
            for index in 0..<130 {
                try store.appendMessage(conversationID: "conv0000", author: index % 2 == 0 ? .user : .assistant, state: .complete, parts: [.text("message-\(index)")])
            }
        }
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("/list")
        #expect(pane.waitFor("50 of 120 — /more"))
        #expect(pane.screen().contains("topic 119") && !pane.screen().contains("topic 69"))
        try pane.line("/more")
        #expect(pane.waitFor("100 of 120"))
        try pane.line("/open conv0000")
        #expect(pane.waitFor("assistant> message-129"))  // (the list's preview shows "message-129" too)
        #expect(pane.screen().contains("you> message-70") && !pane.screen().contains("message-69"))
        try pane.line("/earlier")
        #expect(pane.waitFor("you> message-10\n"))
        #expect(pane.screen().contains("assistant> message-69") && !pane.screen().contains("message-9\n"))
    }

    @Test func attachedImageIsNormalizedStoredAndSent() throws {
        let harness = try ChatHarness(models: ["slow": Self.slowEcho])
        let path = harness.scratch + "/big.png"
        let script = """
            import os, struct, zlib, sys
            w, h = 2000, 1000
            rows = b"".join(b"\\x00" + os.urandom(w * 3) for y in range(h))
            def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
            open(sys.argv[1], "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b""))
            """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", script, path]
        try python.run()
        python.waitUntilExit()
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("/attach \(path)")
        #expect(pane.waitFor("attached big.png (1536×768"))
        try pane.line("what is in the picture")
        #expect(pane.waitFor("echo: what is in the picture"))
        let request = try #require(harness.records("generate").last)
        #expect(request.contains("\"width\":1536"))
        let store = try HistoryStore(directory: harness.dataDirectory)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM images WHERE width = 1536 AND byte_count <= 2097152") == 1)
        #expect((try FileManager.default.contentsOfDirectory(atPath: store.images.directory)).count == 1)
    }
}
