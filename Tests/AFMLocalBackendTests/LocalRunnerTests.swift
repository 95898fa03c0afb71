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
        let client = try local.startLongStream()
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
        // The stream fails as soon as the relay sees the channel close; the registry records the exit a moment
        // later (on the runner's waiter thread), so wait for it rather than read it once.
        #expect(waitUntil(seconds: 10) { (try? local.status()?["last_crash"]?["signal"]) == 9 })
        func restartedRunner() -> Int32? {
            guard let status = try? local.status(), status["state"] == "ready",
                let pid = status["runner_pid"]?.numberValue?.intValue.map(Int32.init), pid != runner
            else { return nil }
            return pid
        }
        #expect(waitUntil(seconds: 30) { restartedRunner() != nil }, "no new runner: \(String(describing: try? local.status()))")
        let next = try local.client().post(
            "/v1/responses", json: #"{"model":"on-device","input":"Say hello.","max_output_tokens":16,"temperature":0}"#)
        #expect(next.status == 200, "\(next)")
        #expect(next.json?["output"]?[0]?["content"]?[0]?["text"]?.stringValue?.isEmpty == false)
    }

    /// Issue 7: "the RSS of the daemon plus runners before and after 10 model swaps stays within 10%" — here with
    /// the real model: SmolLM2 and Gemma 3 270M alternate through a drop-in and a reload, one request each.
    @Test func tenModelSwapsReturnTheirMemory() throws {
        let gemma = ModelSwapTests.gemmaModel
        guard FileManager.default.fileExists(atPath: gemma) else {
            throw LocalDaemon.Failure(description: "\(gemma) is missing: run `scripts/fetch-model gemma3-270m` (or `make model-gemma`)")
        }
        let local = try LocalDaemon()
        let daemon = local.daemon.process.processIdentifier
        func runnerPID() throws -> Int32 {
            try #require(try local.status()?["runner_pid"]?.numberValue?.intValue.map(Int32.init))
        }
        func useIt(_ model: String) throws {
            let response = try local.client().post(
                "/v1/responses", json: #"{"model":"on-device","input":"Say hello.","max_output_tokens":8,"temperature":0}"#)
            #expect(response.status == 200, "\(response)")
            #expect(response.json?["model"] == .string(model), "\(response)")
        }
        try useIt(ModelSwapTests.smolID)
        let firstRunner = try runnerPID()
        let daemonBefore = ResidentMemory.kibibytes(of: daemon)
        let before = daemonBefore + ResidentMemory.kibibytes(of: firstRunner)
        var runners = [firstRunner]
        let dropIns = local.daemon.root + "/etc/afm/afmd.conf.d"
        try FileManager.default.createDirectory(atPath: dropIns, withIntermediateDirectories: true)
        for swap in 1...10 {
            let toGemma = swap % 2 == 1
            if toGemma {
                try "[Backend.local]\nModel=\(gemma)\n".write(toFile: dropIns + "/50-model.conf", atomically: true, encoding: .utf8)
            } else {
                try FileManager.default.removeItem(atPath: dropIns + "/50-model.conf")
            }
            let reload = try local.daemon.afmctl(["reload", "--wait"])
            #expect(reload.status == 0, "swap \(swap): \(reload.output) \(reload.errors)")
            try useIt(toGemma ? ModelSwapTests.gemmaID : ModelSwapTests.smolID)
            runners.append(try runnerPID())
        }
        #expect(Set(runners).count == 11, "\(runners)")
        // Every old runner exited and was reaped: no process, no zombie.
        #expect(waitUntil(seconds: 30) { runners.dropLast().allSatisfy { kill($0, 0) != 0 } })
        let daemonAfter = ResidentMemory.kibibytes(of: daemon)
        let after = daemonAfter + ResidentMemory.kibibytes(of: try runnerPID())
        let change = Double(after - before) / Double(before)
        print(
            "local model swaps: RSS daemon+runner before \(before) KiB (daemon \(daemonBefore)), after 10 swaps \(after) KiB (daemon \(daemonAfter)) (\(String(format: "%+.1f", change * 100))%)")
        if ResidentMemory.measuresLeaks {
            #expect(abs(change) < 0.10, "before \(before) KiB, after \(after) KiB")
        }
        // A clean exit; under AddressSanitizer that includes LeakSanitizer's check of afmd's heap.
        #expect(local.daemon.stop() == 0, "\(local.daemon.log.suffix(3000))")
    }
}
