// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

/// `afm chat --web` against a real afmd (scripted backend): a real browser (Debian's chromium through
/// python3-selenium, Tests/webchat/drive.py) drives the page, the terminal chat opens the same history while the web
/// chat runs, and foreign `Host`s and `Origin`s are refused. Screenshots go to .build/artifacts.
@Suite(.serialized) struct WebChatTests {
    static let alpha = #"{"capabilities":{"streaming":true,"tools":false,"vision":true,"reasoning":false},"steps":[{"text":"Answer: "},{"echo":true},{"text":"\n\n```python\nprint(\"hi\")\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"}]}"#
    static let slow = #"{"capabilities":{"streaming":true,"tools":false,"vision":true,"reasoning":false},"steps":[{"repeat":12,"steps":[{"text":"tick "},{"delay_ms":250}]},{"text":"done"}]}"#

    /// A running `afm chat --web` on a free loopback port.
    final class WebChat {
        let process = Process()
        let port: Int
        var url: String { "http://127.0.0.1:\(port)" }

        init(gateway: String, dataDirectory: String) throws {
            process.executableURL = URL(fileURLWithPath: ChatHarness.afm)
            process.arguments = ["chat", "--web", "--listen", "127.0.0.1:0", "--url", gateway, "--data-dir", dataDirectory]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.standardError
            try process.run()
            var text = ""
            let deadline = Date().addingTimeInterval(20)
            while !text.contains("/ (history"), Date() < deadline {
                let data = output.fileHandleForReading.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            guard let match = text.firstMatch(of: #/http://127\.0\.0\.1:(\d+)//#), let port = Int(match.1) else {
                process.terminate()
                throw TmuxFailure(message: "afm chat --web did not say where it listens: \(text)")
            }
            self.port = port
        }

        /// Stops it with SIGINT (as Ctrl-C) and returns its exit status.
        func stop() -> Int32 {
            kill(process.processIdentifier, SIGINT)
            process.waitUntilExit()
            return process.terminationStatus
        }

        deinit { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
    }

    /// A 2000×1000 PNG of noise (scaled to 1536×768 when attached).
    private func bigImage(_ path: String) throws {
        let script = """
            import os, struct, zlib, sys
            w, h = 2000, 1000
            rows = b"".join(b"\\x00" + os.urandom(w * 3) for y in range(h))
            def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
            open(sys.argv[1], "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b""))
            """
        let result = try CommandOutput.run("/usr/bin/env", ["python3", "-c", script, path])
        try #require(result.status == 0, "\(result.output)")
    }

    @Test func aBrowserDrivesTheChatAndTheTerminalOpensTheSameHistory() throws {
        let harness = try ChatHarness(models: ["alpha": Self.alpha, "slow": Self.slow])
        do {
            let store = try HistoryStore(directory: harness.dataDirectory)
            for index in 0..<55 {
                let conversation = try store.createConversation(title: "topic \(index)")
                try store.connection.execute(
                    "UPDATE conversations SET updated_at = ? WHERE id = ?", [.integer(1_000_000 + Int64(index) * 1000), .text(conversation.id)])
            }
            let long = try store.createConversation(title: "long history")
            for index in 0..<130 {
                try store.appendMessage(
                    conversationID: long.id, author: index % 2 == 0 ? .user : .assistant, state: .complete, parts: [.text("message-\(index)")])
            }
        }
        let image = harness.scratch + "/big.png"
        try bigImage(image)
        let web = try WebChat(gateway: harness.url, dataDirectory: harness.dataDirectory)
        let artifacts = TestPaths.root + "/.build/artifacts"
        let drive = try CommandOutput.run("/usr/bin/python3", [TestPaths.root + "/Tests/webchat/drive.py", web.url, image, artifacts])
        #expect(drive.status == 0, "\(drive.output)")
        #expect(drive.output.contains("ok: all"))
        #expect(FileManager.default.fileExists(atPath: artifacts + "/webchat-restored.png"))

        // What the page did is in the history.
        let store = try HistoryStore(directory: harness.dataDirectory)
        let zebra = try #require(try store.listConversations(limit: 100).first { $0.title.hasPrefix("hello zebra") })
        let messages = try store.messages(conversationID: zebra.id)
        #expect(messages.map(\.state) == [.complete, .complete, .complete, .interrupted, .complete, .complete, .complete, .complete])
        #expect(messages.last?.usage.map { $0.outputTokens > 0 } == true, "token usage stored")
        #expect(messages[6].images.count == 3 && messages[6].images.contains { $0.width == 1536 && $0.height == 768 })
        #expect(try store.conversationCount() == 56)  // 55 topics + long history + hello zebra − topic 50
        #expect(try store.listConversations(limit: 100).contains { $0.title == "Renamed history" && $0.draft == "an unsent web draft" })
        #expect(try store.inputHistory(conversationID: zebra.id).last == "what is in the pictures")

        // The terminal chat opens the same history while the web chat runs, and the web chat sees what it adds.
        let pane = try TmuxPane(command: [ChatHarness.afm, "chat", "--url", harness.url, "--data-dir", harness.dataDirectory])
        #expect(pane.waitFor("/help for commands"))
        try pane.line("/search zebra")
        #expect(pane.waitFor("match(es)"))
        try pane.line("/open \(zebra.id.prefix(8))")
        #expect(pane.waitFor("Answer: what is in the pictures"))
        try pane.press("Up")  // the web chat's inputs are this conversation's input history too
        #expect(pane.waitFor("you> what is in the pictures", count: 2))
        try pane.press("C-u")
        try pane.line("from the terminal")
        #expect(pane.waitFor("Answer: from the terminal"))
        let client = try TestHTTPClient(port: web.port)
        let page = try client.get("/api/conversations/\(zebra.id)/messages")
        #expect(page.status == 200 && page.text.contains("Answer: from the terminal"), "\(page)")
        #expect(web.stop() == 0)
    }

    @Test func foreignHostsAndOriginsAreRefusedAndThePageIsSelfContained() throws {
        let harness = try ChatHarness(models: ["alpha": Self.alpha])
        let web = try WebChat(gateway: harness.url, dataDirectory: harness.dataDirectory)
        func raw(_ request: String) throws -> TestHTTPClient.Response {
            let client = try TestHTTPClient(port: web.port)
            try client.send(request)
            return try client.readResponse()
        }
        let page = try TestHTTPClient(port: web.port).get("/")
        #expect(page.status == 200)
        let policy = try #require(page.header("Content-Security-Policy"))
        for directive in ["default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"] {
            #expect(policy.contains(directive), "\(policy)")
        }
        #expect(page.header("X-Frame-Options") == "DENY" && page.header("X-Content-Type-Options") == "nosniff")
        // The page names no other site: its script and style come from /, nothing from a CDN.
        #expect(!page.text.contains("http://") && !page.text.contains("https://") && !page.text.contains("//cdn"))
        #expect(page.text.contains(#"<script src="/app.js""#) && !page.text.contains("<script>") && !page.text.contains("<style"))

        // DNS rebinding: another name in Host.
        let rebound = try raw("GET /api/conversations HTTP/1.1\r\nHost: evil.example:\(web.port)\r\nConnection: close\r\n\r\n")
        #expect(rebound.status == 403 && rebound.text.contains("forbidden_host"), "\(rebound)")
        // Another site's page: its Origin, for a read and for a change.
        let read = try raw("GET /api/conversations HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nOrigin: https://evil.example\r\nConnection: close\r\n\r\n")
        #expect(read.status == 403 && read.text.contains("forbidden_origin"), "\(read)")
        let body = "{}"
        let write = try raw(
            "POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
        #expect(write.status == 403, "\(write)")
        // A form post (no preflight needed) is not JSON.
        let form = try raw(
            "POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        #expect(form.status == 415 && form.text.contains("unsupported_media_type"), "\(form)")
        let delete = try raw("DELETE /api/conversations/x HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nConnection: close\r\n\r\n")
        #expect(delete.status == 415, "\(delete)")
        // The page's own origin is accepted.
        let own = try raw(
            "POST /api/conversations HTTP/1.1\r\nHost: 127.0.0.1:\(web.port)\r\nOrigin: http://127.0.0.1:\(web.port)\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
        #expect(own.status == 201, "\(own)")
        #expect(try CommandOutput.run(ChatHarness.afm, ["chat", "--web", "--listen", "nowhere"]).status == 64)
        #expect(web.stop() == 0)
    }

    /// An unreachable gateway is the gateway's problem: 503 `model_unavailable`, and the history still answers.
    @Test func anUnreachableGatewayIsReportedAsUnavailable() throws {
        let data = TestPaths.makeTemporaryDirectory("afm-web-dead")
        let web = try WebChat(gateway: "http://127.0.0.1:9", dataDirectory: data)
        let models = try TestHTTPClient(port: web.port).get("/api/models")
        #expect(models.status == 503 && models.text.contains("model_unavailable"), "\(models)")
        // A body is parsed with the cap afmd puts on its own (before, 300,000 empty objects were parsed whole, and
        // 48 MiB of them would have been gigabytes).
        let filler = Array(repeating: "{}", count: 300_000).joined(separator: ",")
        let crowded = try TestHTTPClient(port: web.port).post("/api/conversations", json: #"{"title":"t","x":[\#(filler)]}"#)
        #expect(crowded.status == 400 && crowded.text.contains("too_many_values"), "\(crowded.status) \(crowded.text.prefix(300))")
        let created = try TestHTTPClient(port: web.port).post("/api/conversations", json: "{}")
        #expect(created.status == 201, "\(created)")
        let id = try #require(created.json?["id"]?.stringValue)
        let send = try TestHTTPClient(port: web.port).post("/api/conversations/\(id)/messages", json: #"{"text":"hello"}"#)
        #expect(send.status == 503 && send.text.contains("model_unavailable"), "\(send)")
        let list = try TestHTTPClient(port: web.port).get("/api/conversations")
        #expect(list.status == 200 && list.text.contains(id), "\(list)")
        #expect(web.stop() == 0)
    }

    /// The page has no login, so an address other machines reach is refused unless `--allow-remote` says so; a
    /// created conversation's title is bounded like a rename's; a search of many words answers. Before: `--listen 0.0.0.0:0` served the whole
    /// history to the network, and `POST /api/conversations` stored a title of any length (up to 1 MiB),
    /// and `GET /api/search` with 1500 words failed with 500.
    @Test func aRemoteListenNeedsAllowRemoteAndTitlesAreBounded() throws {
        func exits(_ arguments: [String]) throws -> Int32? {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ChatHarness.afm)
            process.arguments = arguments
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
            let deadline = Date().addingTimeInterval(10)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
                return nil
            }
            return process.terminationStatus
        }
        let data = TestPaths.makeTemporaryDirectory("afm-web-remote")
        for listen in ["0.0.0.0:0", "[::]:0"] {
            #expect(try exits(["chat", "--web", "--listen", listen, "--url", "http://127.0.0.1:9", "--data-dir", data]) == 64, "\(listen)")
        }
        #expect(try exits(["chat", "--allow-remote"]) == 64)

        let web = try WebChat(gateway: "http://127.0.0.1:9", dataDirectory: data)
        let long = String(repeating: "t", count: 10_000)
        let created = try TestHTTPClient(port: web.port).post("/api/conversations", json: #"{"title":"\#(long)"}"#)
        #expect(created.status == 400 && created.text.contains("invalid_title"), "\(created.status)")
        let fine = try TestHTTPClient(port: web.port).post("/api/conversations", json: #"{"title":"  short  "}"#)
        #expect(fine.status == 201 && fine.json?["title"]?.stringValue == "short", "\(fine)")
        // A search of many words was one SQL clause each: SQLite refused the query (500 `internal`).
        let words = (0..<1500).map { "w\($0)" }.joined(separator: "+")
        let search = try TestHTTPClient(port: web.port).get("/api/search?q=short+\(words)")
        #expect(search.status == 200, "\(search.status) \(search.text.prefix(300))")
        #expect(web.stop() == 0)
    }
}
