// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

/// Several `afm` processes on one history, imports, and piped sessions (issue #24).
@Suite struct SharedHistoryTests {
    static func ticking(_ count: Int, milliseconds: Int) -> String {
        #"{"steps":[{"repeat":\#(count),"steps":[{"text":"tick "},{"delay_ms":\#(milliseconds)}]},{"text":"end."}]}"#
    }

    @Test func aSecondChatLeavesTheAnswerTheFirstIsStreamingAlone() throws {
        let harness = try ChatHarness(models: ["slow": Self.ticking(15, milliseconds: 200)])
        let arguments = ["--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "slow"]
        let first = try PipedChat(arguments: arguments, scratch: harness.scratch)
        first.write("a long question\n")
        #expect(waitUntil(seconds: 30) { !harness.records("generate").isEmpty })
        let second = try PipedChat(arguments: arguments, scratch: harness.scratch)
        second.write("/quit\n")
        #expect(second.waitForExit() == 0)
        #expect(!second.output.contains("unfinished answer"), "\(second.output)")
        let connection = try Connection(path: harness.dataDirectory + "/history.sqlite")
        #expect(try connection.scalarText("SELECT state FROM messages WHERE author = 'assistant'") == "pending")
        first.closeInput()
        #expect(first.waitForExit() == 0)
        #expect(try connection.scalarText("SELECT state FROM messages WHERE author = 'assistant'") == "complete")
    }

    @Test func aPipedChatAtEndOfInputWaitsForTheAnswerWithoutSpinning() throws {
        let harness = try ChatHarness(models: ["slow": Self.ticking(20, milliseconds: 150)])
        let chat = try PipedChat(
            arguments: ["--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "slow"], scratch: harness.scratch)
        chat.write("a question\n")
        chat.closeInput()
        #expect(waitUntil(seconds: 30) { !harness.records("generate").isEmpty })
        let before = try #require(chat.cpuTicks())
        Thread.sleep(forTimeInterval: 2)
        let after = try #require(chat.cpuTicks())
        // Waiting for the stream costs next to nothing; a loop polling the closed input used a whole core.
        #expect(after - before < 30, "afm used \(after - before) ticks of CPU in 2 s")
        #expect(chat.waitForExit() == 0)
        #expect(chat.output.contains("end."))
    }

    /// The terminal's `/rename` has the web page's bound (the store's): before, a 10,000-character title was stored
    /// and then shown in every list of both clients.
    @Test func aTerminalRenameBeyondTheTitleBoundIsRefused() throws {
        let harness = try ChatHarness(models: ["quick": #"{"steps":[{"text":"ok"}]}"#])
        let chat = try PipedChat(
            arguments: ["--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "quick"], scratch: harness.scratch)
        chat.write("a question\n")
        chat.write("/rename " + String(repeating: "x", count: 10_000) + "\n")
        chat.write("/rename short title\n")
        chat.closeInput()
        #expect(chat.waitForExit() == 0)
        #expect(chat.output.contains("a title has at most 200 characters"), "\(chat.output.suffix(400))")
        let connection = try Connection(path: harness.dataDirectory + "/history.sqlite")
        #expect(try connection.scalarText("SELECT max(length(title)) FROM conversations") == "11")
    }

    @Test func aPipedChatKeepsTheDraftOfTheInteractiveSession() throws {
        let harness = try ChatHarness(models: ["quick": #"{"steps":[{"text":"ok"}]}"#])
        let id: String
        do {
            let store = try HistoryStore(directory: harness.dataDirectory)
            id = try store.createConversation(title: "open").id
            try store.setAppState("current_conversation", id)
            try store.saveDraft("typed in a terminal", conversationID: id)
        }
        let chat = try PipedChat(
            arguments: ["--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "quick"], scratch: harness.scratch)
        chat.write("a piped question\n")
        chat.closeInput()
        #expect(chat.waitForExit() == 0)
        let store = try HistoryStore(directory: harness.dataDirectory)
        #expect(try store.draft(conversationID: id) == "typed in a terminal")
        #expect(try store.messages(conversationID: id).map(\.text) == ["a piped question", "ok"])  // the draft was not sent
    }

    @Test func aPipedOpenDoesNotPutTheDraftBeforeTheNextLine() throws {
        let harness = try ChatHarness(models: ["quick": #"{"steps":[{"text":"ok"}]}"#])
        let id: String
        do {
            let store = try HistoryStore(directory: harness.dataDirectory)
            id = try store.createConversation(title: "other").id
            try store.saveDraft("half typed ", conversationID: id)
        }
        let chat = try PipedChat(
            arguments: ["--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "quick"], scratch: harness.scratch)
        chat.write("/open \(id)\nhello\n")
        chat.closeInput()
        #expect(chat.waitForExit() == 0)
        let store = try HistoryStore(directory: harness.dataDirectory)
        #expect(try store.messages(conversationID: id).map(\.text) == ["hello", "ok"])
        #expect(try store.draft(conversationID: id) == "half typed ")
    }

    @Test func anImportDecodesItsImagesWithoutHoldingTheWriteLock() throws {
        let scratch = TestPaths.makeTemporaryDirectory("afm-import-lock")
        let data = scratch + "/data"
        let archive = scratch + "/archive"
        try FileManager.default.createDirectory(atPath: archive + "/Images", withIntermediateDirectories: true)
        let count = 8
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = [
            "python3", "-c",
            """
            import os, struct, zlib, sys
            w = h = 600
            def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
            for i in range(int(sys.argv[2])):
                rows = b"".join(b"\\x00" + os.urandom(w * 3) for y in range(h))
                open(f"{sys.argv[1]}/{i}.png", "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows, 1)) + chunk(b"IEND", b""))
            """,
            archive + "/Images", "\(count)",
        ]
        try python.run()
        python.waitUntilExit()
        let messages = (0..<count).map { #"{"id":"m\#($0)","author":"user","created_at":1,"parts":[{"type":"image","file":"\#($0).png"}]}"# }
        let json = #"{"format":"afm-chat-archive","version":1,"conversations":[{"id":"c1","created_at":1,"messages":[\#(messages.joined(separator: ","))]}]}"#
        try json.write(toFile: archive + "/conversations.json", atomically: true, encoding: .utf8)
        _ = try HistoryStore(directory: data)
        let probe = try Connection(path: data + "/history.sqlite", busyTimeoutMilliseconds: 0)
        func imageFiles() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: data + "/images")) ?? []).filter { !$0.hasPrefix(".") }.count
        }

        let importer = Process()
        importer.executableURL = URL(fileURLWithPath: ChatHarness.afm)
        importer.arguments = ["chat", "--import", archive, "--data-dir", data]
        importer.standardOutput = FileHandle.nullDevice
        importer.standardError = FileHandle.nullDevice
        try importer.run()
        // While some but not all images are in the store, the import is still decoding: another process (here
        // a write transaction) must get the write lock then, as a second `afm chat` starting needs it.
        var midImport = 0
        var lockedOut = 0
        var writable = 0
        while importer.isRunning {
            let before = imageFiles()
            guard before > 0 && before < count else {
                usleep(200)
                continue
            }
            midImport += 1
            let acquired: Void? = try? probe.transaction { () -> Void in
                if imageFiles() < count { writable += 1 }
            }
            if acquired == nil { lockedOut += 1 }
        }
        importer.waitUntilExit()
        #expect(importer.terminationStatus == 0)
        #expect(imageFiles() == count)
        #expect(midImport > 0)
        #expect(writable > 0, "the write lock was held whenever images were being imported (\(lockedOut) of \(midImport) tries)")
    }

    @Test func twoImportsOfOneArchiveAtOnceBothSucceed() throws {
        let scratch = TestPaths.makeTemporaryDirectory("afm-import-twice")
        let data = scratch + "/data"
        let archive = scratch + "/archive"
        try FileManager.default.createDirectory(atPath: archive, withIntermediateDirectories: true)
        let json = #"{"format":"afm-chat-archive","version":1,"conversations":[{"id":"c1","created_at":1,"messages":[{"id":"m1","author":"user","created_at":1,"parts":[{"type":"text","text":"hi"}]}]}]}"#
        try json.write(toFile: archive + "/conversations.json", atomically: true, encoding: .utf8)
        _ = try HistoryStore(directory: data)
        // Another writer holds the write lock, so both imports find no marker and wait at their transaction.
        let holder = try Connection(path: data + "/history.sqlite")
        try holder.executeScript("BEGIN IMMEDIATE")
        var importers: [(process: Process, output: Pipe)] = []
        for _ in 0..<2 {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: ChatHarness.afm)
            process.arguments = ["chat", "--import", archive, "--data-dir", data]
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            importers.append((process, output))
        }
        // Both wait in SQLite's busy handler (nanosleep) before the lock is released.
        func sleeping(_ process: Process) -> Bool {
            let call = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/syscall", encoding: .utf8)) ?? ""
            return call.hasPrefix("230 ") || call.hasPrefix("35 ")
        }
        let bothWaited = waitUntil(seconds: 4) { importers.allSatisfy { sleeping($0.process) } }
        try holder.executeScript("ROLLBACK")
        var outputs: [String] = []
        for importer in importers {
            let text = String(decoding: importer.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            importer.process.waitUntilExit()
            outputs.append("\(importer.process.terminationStatus): \(text)")
        }
        #expect(bothWaited)
        #expect(outputs.filter { $0.hasPrefix("0: imported 1 conversations") }.count == 1, "\(outputs)")
        #expect(outputs.filter { $0.hasPrefix("0: \(archive) was imported before") }.count == 1, "\(outputs)")
        #expect(try HistoryStore(directory: data).conversationCount() == 1)
    }

    /// A 4×4 PNG (python3's zlib, as the other chat tests).
    static func png() throws -> [UInt8] {
        let path = TestPaths.makeTemporaryDirectory("afm-png") + "/small.png"
        let script = """
            import struct, zlib, sys
            w, h = 4, 4
            rows = b"".join(b"\\x00" + bytes(range(w * 3)) for y in range(h))
            def chunk(k, d): return struct.pack(">I", len(d)) + k + d + struct.pack(">I", zlib.crc32(k + d) & 0xffffffff)
            open(sys.argv[1], "wb").write(b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
            """
        let python = Process()
        python.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        python.arguments = ["python3", "-c", script, path]
        try python.run()
        python.waitUntilExit()
        return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    }
}
