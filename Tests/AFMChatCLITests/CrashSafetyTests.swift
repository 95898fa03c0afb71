// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMStore
import AFMTestSupport
import Foundation
import Testing

@Suite struct CrashSafetyTests {
    /// 50 streamed answers through a piped `afm chat`, killed with SIGKILL part-way; the database must pass
    /// `integrity_check` and hold every turn whose answer had finished.
    @Test func killNineDuringFiftyStreamedAnswersKeepsEveryCompletedTurn() throws {
        let model = #"{"steps":[{"repeat":8,"steps":[{"text":"part "},{"delay_ms":10}]},{"text":"end."}]}"#
        let harness = try ChatHarness(models: ["fast": model])
        let client = Process()
        client.executableURL = URL(fileURLWithPath: ChatHarness.afm)
        client.arguments = ["chat", "--url", harness.url, "--data-dir", harness.dataDirectory, "--model", "fast"]
        let input = Pipe()
        client.standardInput = input
        client.standardOutput = FileHandle.nullDevice
        client.standardError = FileHandle.nullDevice
        try client.run()
        let lines = (0..<50).map { "question \($0)\n" }.joined()
        input.fileHandleForWriting.write(Data(lines.utf8))
        // Kill in the middle of an answer, after about half of them.
        #expect(waitUntil(seconds: 60) { harness.records("generate").count >= 25 })
        usleep(40_000)
        kill(client.processIdentifier, SIGKILL)
        client.waitUntilExit()
        let finished = harness.records("terminal").filter { $0.contains(#""reason":"stop""#) }.count
        #expect(finished >= 24)

        let connection = try Connection(path: harness.dataDirectory + "/history.sqlite")
        #expect(try connection.integrityCheck() == "ok")
        let complete = try connection.query(
            "SELECT p.text FROM messages m JOIN parts p ON p.message_id = m.id WHERE m.author = 'assistant' AND m.state = 'complete'"
        ) { $0.text(0) }
        // The answer whose terminal event was in flight at the kill may not have been committed yet.
        #expect(complete.count >= finished - 1 && complete.count <= finished)
        #expect(complete.allSatisfy { $0 == String(repeating: "part ", count: 8) + "end." })
        let users = try connection.scalarInteger("SELECT count(*) FROM messages WHERE author = 'user'") ?? 0
        #expect(users >= Int64(complete.count))
        // Reopening marks the answer that was streaming as interrupted.
        let store = try HistoryStore(directory: harness.dataDirectory)
        #expect(try store.connection.scalarInteger("SELECT count(*) FROM messages WHERE state = 'pending'") == 0)
        #expect(try store.connection.integrityCheck() == "ok")
    }
}
