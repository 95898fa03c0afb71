// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Synchronization
import Testing

/// Runner hosting in a real afmd: a crashing backend fails only its own streams, shows in /status and on the
/// admin socket, restarts; runners inherit no listener; swapping runners returns their memory.
@Suite struct RunnerHostingTests {
    /// afmd with the C fixture in a runner and the scripted backend (model `slow`, ~1 s) in-process.
    struct Harness {
        let directory = BackendDirectoryBuilder()
        let daemon: DaemonProcess

        init() throws {
            try directory.addCFixture(hosting: "runner")
            try directory.addScripted(hosting: "in-process")
            let scratch = TestPaths.makeTemporaryDirectory("afm-runner-daemon")
            let script = #"{"script_version":1,"models":[{"id":"slow","context_tokens":4096,"steps":[{"repeat":40,"steps":[{"text":"a"},{"delay_ms":25}]}]}]}"#
            try script.write(toFile: scratch + "/script.json", atomically: true, encoding: .utf8)
            daemon = try DaemonProcess(
                backendDirectory: directory.path, config: "[Backend.scripted]\nScript=\(scratch)/script.json\n")
        }

        func status() throws -> JSONValue {
            try #require(try TestHTTPClient(port: daemon.port).get("/status").json)
        }

        func backend(_ id: String) throws -> JSONValue? {
            try status()["backends"]?.arrayValue?.first { $0["id"] == .string(id) }
        }

        func runnerPID() throws -> Int32? {
            try backend("c-fixture")?["runner_pid"]?.numberValue?.intValue.map(Int32.init)
        }
    }

    /// Runs every body on its own thread (the test client blocks) and returns the results in order.
    func parallel<T: Sendable>(_ bodies: [@Sendable () -> T]) -> [T] {
        let results = Mutex<[Int: T]>([:])
        let group = DispatchGroup()
        for (index, body) in bodies.enumerated() {
            group.enter()
            Thread {
                let value = body()
                results.withLock { $0[index] = value }
                group.leave()
            }.start()
        }
        group.wait()
        return results.withLock { dictionary in bodies.indices.map { dictionary[$0]! } }  // Every index was filled.
    }

    func stream(_ port: Int, _ model: String) -> @Sendable () -> [(event: String, data: JSONValue)] {
        {
            guard let client = try? TestHTTPClient(port: port),
                let response = try? client.post("/v1/responses", json: responsesBody(model: model, stream: true))
            else { return [] }
            return response.events
        }
    }

    /// A client that leaves while its runner-hosted `generate` is still running (`c-slow-generate` takes 1.5 s to
    /// return): the answer's stream can never start, yet the request must leave the token monitor's running set
    /// and its generation must end (no phantom "running" request in `afmctl top`, no lease held).
    @Test func aClientThatLeavesDuringGenerateLeavesNothingRunning() throws {
        let harness = try Harness()
        let client = try TestHTTPClient(port: harness.daemon.port)
        try client.sendRequest(
            "POST", "/v1/responses", body: Array(responsesBody(model: "c-slow-generate", input: "1500", stream: true).utf8),
            headers: ["Content-Type": "application/json"])
        client.close()
        /// The token monitor's count of running requests, from one `afmctl --json top` sample.
        func running() -> Int? {
            let top = Process()
            top.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
            top.arguments = ["--socket", harness.daemon.adminSocket, "--json", "top", "--interval", "100"]
            let pipe = Pipe()
            top.standardOutput = pipe
            guard (try? top.run()) != nil else { return nil }
            var line: [UInt8] = []
            while !line.contains(10) {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                line += chunk
            }
            _ = top.terminateGracefully(within: 2)
            let first = line.split(separator: 10).first.map { String(decoding: $0, as: UTF8.self) } ?? ""
            return (try? JSONParser.parse(first))?["running"]?.numberValue?.intValue
        }
        // The request started (the token monitor counts it from then on) before the checks below mean anything.
        #expect(waitUntil(seconds: 20) { (try? harness.status()["tokens"]?["requests"]?.numberValue?.intValue) == 1 })
        #expect(waitUntil(seconds: 20) { running() == 0 }, "the abandoned request stayed running")
        #expect(waitUntil(seconds: 20) { (try? harness.backend("c-fixture")?["inflight"]?.numberValue?.intValue) == 0 })
    }

    @Test func aCrashingBackendFailsExactlyItsStreamsAndComesBack() throws {
        let harness = try Harness()
        let port = harness.daemon.port
        let bodies = [stream(port, "c-slow"), stream(port, "c-slow"), stream(port, "c-slow"), stream(port, "c-segfault")]
            + (0..<4).map { _ in stream(port, "slow") }
        let results = parallel(bodies)
        for events in results.prefix(4) {
            #expect(events.last?.event == "response.failed", "\(events.map(\.event))")
            #expect(events.last?.data["response"]?["error"]?["code"] == "backend_crashed")
            #expect(events.contains { $0.event == "response.output_text.delta" })  // it was mid-stream
        }
        for events in results.suffix(4) {
            #expect(events.last?.event == "response.completed", "\(events.map(\.event))")
        }
        // /status and the admin socket show the crash with its signal (recorded on the runner's waiter thread,
        // a moment after the streams failed).
        #expect(waitUntil { ((try? harness.backend("c-fixture")?["last_crash"]) ?? .null) != .null })
        let crash = try #require(try harness.backend("c-fixture")?["last_crash"])
        #expect(crash["signal"] == 11)
        let admin = try harness.daemon.afmctl(["--json", "backends"])
        #expect(admin.status == 0)
        let listed = try JSONParser.parse(admin.output)["backends"]?.arrayValue?.first { $0["id"] == "c-fixture" }
        #expect(listed?["last_crash"]?["signal"] == 11)
        #expect(harness.daemon.log.contains("backend crashed"))
        // Restarted within the backoff, and serving.
        #expect(waitUntil(seconds: 5) { (try? harness.backend("c-fixture")?["state"]) == "ready" })
        let next = try TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "c-echo", input: "again"))
        #expect(next.status == 200, "\(next)")
        #expect(next.json?["output"]?[0]?["content"]?[0]?["text"] == "again")
    }

    @Test func killMinusNineOfTheRunnerMidStream() throws {
        let harness = try Harness()
        let port = harness.daemon.port
        let pid = try #require(try harness.runnerPID())
        let bodies = (0..<4).map { _ in stream(port, "c-slow") } + (0..<4).map { _ in stream(port, "slow") }
        let killer: @Sendable () -> [(event: String, data: JSONValue)] = {
            usleep(300_000)
            kill(pid, SIGKILL)
            return []
        }
        let results = parallel(bodies + [killer])
        for events in results.prefix(4) {
            #expect(events.last?.event == "response.failed", "\(events.map(\.event))")
            #expect(events.last?.data["response"]?["error"]?["code"] == "backend_crashed")
        }
        for events in results[4..<8] { #expect(events.last?.event == "response.completed") }
        #expect(waitUntil { (try? harness.backend("c-fixture")?["last_crash"]?["signal"]) == 9 })
        #expect(waitUntil(seconds: 5) {
            guard (try? harness.backend("c-fixture")?["state"]) == "ready", let current = (try? harness.runnerPID()) ?? nil
            else { return false }
            return current != pid
        })
        #expect(try TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "c-echo")).status == 200)
    }

    @Test func aRunnerHasNoDescriptorOfTheListener() throws {
        let harness = try Harness()
        let daemonPID = harness.daemon.process.processIdentifier
        let runner = try #require(try harness.runnerPID())
        // The listener's inode, from /proc/net/tcp (state 0A = LISTEN on the daemon's port).
        let portHex = String(format: "%04X", harness.daemon.port)
        let listenerInode = readProcFile("/proc/net/tcp").split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count > 9, fields[1].hasSuffix(":" + portHex), fields[3] == "0A" else { return nil }
            return String(fields[9])
        }.first
        let inode = try #require(listenerInode)
        func socketInodes(_ pid: Int32) -> [Int: String] {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
            var result: [Int: String] = [:]
            for name in names {
                guard let number = Int(name), let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)") else { continue }
                result[number] = target
            }
            return result
        }
        #expect(socketInodes(daemonPID).values.contains("socket:[\(inode)]"))  // the daemon has it
        let runnerFDs = socketInodes(runner)
        #expect(!runnerFDs.values.contains("socket:[\(inode)]"))
        #expect(runnerFDs.keys.sorted() == [0, 1, 2, 3], "\(runnerFDs)")
        // Its channel is one end of a socketpair whose other end the daemon holds.
        #expect(runnerFDs[3]?.hasPrefix("socket:") == true)
    }

    @Test func stoppingAfmdEndsItsRunnersAndKillingItToo() throws {
        let graceful = try Harness()
        let first = try #require(try graceful.runnerPID())
        #expect(graceful.daemon.stop() == 0)
        #expect(waitUntil(seconds: 5) { kill(first, 0) != 0 })
        // SIGKILL of afmd: the runner reads end of file on its channel and exits by itself.
        let killed = try Harness()
        let second = try #require(try killed.runnerPID())
        kill(killed.daemon.process.processIdentifier, SIGKILL)
        killed.daemon.process.waitUntilExit()
        #expect(waitUntil(seconds: 5) {
            // Gone, or a zombie waiting for a reaper that is not us (its parent died; init reaps it).
            kill(second, 0) != 0 || readProcFile("/proc/\(second)/status").contains("State:\tZ")
        })
    }

    @Test func tenRunnerSwapsReturnTheirMemory() throws {
        let harness = try Harness()
        let daemonPID = harness.daemon.process.processIdentifier
        func total() throws -> (Int, Int32) {
            let runner = try #require(try harness.runnerPID())
            return (ResidentMemory.kibibytes(of: daemonPID) + ResidentMemory.kibibytes(of: runner), runner)
        }
        func useIt() throws {
            #expect(try TestHTTPClient(port: harness.daemon.port).post("/v1/responses", json: responsesBody(model: "c-echo")).status == 200)
        }
        try useIt()
        let (before, firstRunner) = try total()
        var runners: [Int32] = [firstRunner]
        for _ in 0..<10 {
            let reload = try harness.daemon.afmctl(["reload", "c-fixture", "--wait"])
            #expect(reload.status == 0, "\(reload.errors)")
            try useIt()
            runners.append(try #require(try harness.runnerPID()))
        }
        #expect(Set(runners).count == 11)
        // Every old runner exited and was reaped: no process, no zombie.
        #expect(waitUntil(seconds: 10) { runners.dropLast().allSatisfy { kill($0, 0) != 0 } })
        let (after, _) = try total()
        let change = Double(after - before) / Double(before)
        print("RSS daemon+runner: before \(before) KiB, after 10 swaps \(after) KiB (\(String(format: "%+.1f", change * 100))%)")
        if ResidentMemory.measuresLeaks {
            #expect(abs(change) < 0.10, "before \(before) KiB, after \(after) KiB")
        }
        // A clean exit; under AddressSanitizer that includes LeakSanitizer's check of afmd's heap.
        #expect(harness.daemon.stop() == 0, "\(harness.daemon.log.suffix(3000))")
    }

    /// count_tokens on a runner-hosted backend with no admission limit (`MaxConcurrent=0`, the default): 24 counts at
    /// once, each taking the scripted tokenizer 1.5 s. The runner tokenizes on a bounded pool (at most 4 at once, 16
    /// more waiting; beyond that 503 `busy` with Retry-After, in Anthropic's envelope), so its thread count grows by
    /// at most the pool. It started a thread per call: 24 more threads, and as many as the clients sent.
    @Test func countTokensOnARunnerTokenizesOnABoundedPool() throws {
        let harness = try DaemonHarness(
            models: ["slowcount": #"{"tokenize_delay_ms":1500,"steps":[{"text":"ok"}]}"#], config: "[Backend.scripted]\nHosting=runner\n")
        let status = try #require(try harness.client().get("/status").json)
        let runner = try #require(status["backends"]?.arrayValue?.first { $0["id"] == "scripted" }?["runner_pid"]?.numberValue?.intValue)
        @Sendable func threads() -> Int {
            let line = readProcFile("/proc/\(runner)/status").split(separator: "\n").first { $0.hasPrefix("Threads:") } ?? ""
            return Int(line.filter(\.isNumber)) ?? 0
        }
        // One count first, so the pool's threads (started on demand) and the backend's own exist before the baseline.
        let body = #"{"model":"slowcount","messages":[{"role":"user","content":"hello"}]}"#
        #expect(try TestHTTPClient(port: harness.port, timeoutSeconds: 60).post("/v1/messages/count_tokens", json: body).status == 200)
        let idle = threads()
        let peak = Mutex(idle)
        let done = Atomic<Bool>(false)
        let sampler = Thread {
            while !done.load(ordering: .relaxed) {
                let now = threads()
                peak.withLock { $0 = max($0, now) }
                usleep(20_000)
            }
        }
        sampler.start()
        let port = harness.port
        let answers = parallel((0..<24).map { _ in
            { @Sendable () -> (Int, JSONValue?) in
                guard let response = try? TestHTTPClient(port: port, timeoutSeconds: 60).post("/v1/messages/count_tokens", json: body) else {
                    return (0, nil)
                }
                return (response.status, response.json)
            }
        })
        done.store(true, ordering: .relaxed)
        let grown = peak.withLock { $0 } - idle
        #expect(grown <= 4, "the runner grew by \(grown) threads for 24 counts (idle \(idle))")
        #expect(answers.allSatisfy { $0.0 == 200 || $0.0 == 503 }, "\(answers.map(\.0))")
        #expect(answers.filter { $0.0 == 200 }.count >= 4, "\(answers.map(\.0))")
        for (code, json) in answers where code == 503 {
            #expect(json?["error"]?["type"] == "overloaded_error", "\(String(describing: json))")
        }
        // The runner is the same process, and counts again once the burst is over.
        #expect(try harness.client().get("/status").json?["backends"]?.arrayValue?.first { $0["id"] == "scripted" }?["runner_pid"]?.numberValue?.intValue == runner)
        #expect(try TestHTTPClient(port: harness.port, timeoutSeconds: 60).post("/v1/messages/count_tokens", json: body).status == 200)
    }
}
