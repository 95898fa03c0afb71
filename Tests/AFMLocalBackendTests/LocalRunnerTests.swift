// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The local backend in its default hosting, a runner process: llama.cpp lives outside afmd, and a crash in it
/// fails only its own requests (issue 7: "`kill -9` of the local runner mid-stream behaves the same").
@Suite struct LocalRunnerTests {
    /// Whether a process maps a library whose path contains `name`.
    func maps(_ pid: Int32, _ name: String) -> Bool {
        readProcFile("/proc/\(pid)/maps").contains(name)
    }

    @Test func theLocalBackendRunsInARunnerByDefault() throws {
        let local = try LocalDaemon()
        let status = try #require(try local.status())
        #expect(status["hosting"] == "runner")
        let runner = try #require(status["runner_pid"]?.numberValue?.intValue.map(Int32.init))
        let daemon = local.daemon.process.processIdentifier
        #expect(runner != daemon)
        // llama.cpp is mapped into the runner only.
        #expect(maps(runner, "libllama"))
        #expect(!maps(daemon, "libllama"))
        let response = try local.client().post(
            "/v1/responses", json: #"{"model":"on-device","input":"Say hello.","max_output_tokens":16,"temperature":0}"#)
        #expect(response.status == 200, "\(response)")
        #expect(response.json?["output"]?[0]?["content"]?[0]?["text"]?.stringValue?.isEmpty == false)
    }

    @Test func killMinusNineOfTheLocalRunnerMidStream() throws {
        let local = try LocalDaemon()
        let daemon = local.daemon.process.processIdentifier
        let runner = try #require(try local.status()?["runner_pid"]?.numberValue?.intValue.map(Int32.init))
        let client = try local.client()
        try client.sendRequest(
            "POST", "/v1/responses",
            body: Array(#"{"model":"on-device","input":"Count from one to five hundred in words.","stream":true,"max_output_tokens":500}"#.utf8))
        _ = try client.readUntil { $0.components(separatedBy: "response.output_text.delta").count > 3 }
        let killedAt = Date()
        kill(runner, SIGKILL)
        let text = try client.readUntil { $0.contains("event: response.failed") && $0.hasSuffix("\r\n0\r\n\r\n") }
        let failedAfter = Date().timeIntervalSince(killedAt)
        let events = TestHTTPClient.parseEvents(text)
        #expect(events.contains { $0.event == "response.output_text.delta" })
        #expect(events.last?.event == "response.failed", "\(events.map(\.event))")
        #expect(events.last?.data["response"]?["error"]?["code"] == "backend_crashed")
        #expect(failedAfter < 2, "the stream failed \(Int(failedAfter * 1000)) ms after the kill")

        // The daemon is the same process; the crash is visible; the backend restarts and serves again.
        #expect(local.daemon.process.isRunning && local.daemon.process.processIdentifier == daemon)
        #expect(try local.status()?["last_crash"]?["signal"] == 9)
        #expect(waitUntil(seconds: 30) { (try? local.status()?["state"]) == "ready" })
        let restarted = try #require(try local.status()?["runner_pid"]?.numberValue?.intValue.map(Int32.init))
        #expect(restarted != runner)
        let next = try local.client().post(
            "/v1/responses", json: #"{"model":"on-device","input":"Say hello.","max_output_tokens":16,"temperature":0}"#)
        #expect(next.status == 200, "\(next)")
        #expect(next.json?["output"]?[0]?["content"]?[0]?["text"]?.stringValue?.isEmpty == false)
    }
}
