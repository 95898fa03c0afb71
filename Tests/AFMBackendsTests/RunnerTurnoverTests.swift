// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends
import AFMCore
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// Runner turnover leaves nothing behind: after many `kill -9` restarts and reloads, every replaced generation and
/// its runner host are freed, and afmd's threads and descriptors are back at their baseline.
@Suite struct RunnerTurnoverTests {
    /// Weak references, to see whether something outlived its use (only the test's own task touches them).
    final class Weak: @unchecked Sendable {
        weak var generation: BackendGeneration?
        weak var host: RunnerInstanceHost?
        init(_ generation: BackendGeneration) {
            self.generation = generation
            self.host = generation.runnerHost
        }
    }

    static func threadCount() -> Int {
        let line = readProcFile("/proc/self/status").split(separator: "\n").first { $0.hasPrefix("Threads:") } ?? ""
        return Int(line.filter(\.isNumber)) ?? 0
    }

    static func descriptorCount() -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count) ?? 0
    }

    static func anonymousKB() -> Int {
        let line = readProcFile("/proc/self/status").split(separator: "\n").first { $0.hasPrefix("RssAnon:") } ?? ""
        return Int(line.filter(\.isNumber)) ?? 0
    }

    /// 40 turns after 5 to warm up, alternating a `kill -9` of the runner with 3 streams in flight (a crash restart)
    /// and a reload with changed settings with 3 streams in flight (a swap: the old generation drains, its streams
    /// are cancelled, it retires). Every replaced generation and its `RunnerInstanceHost` must be freed, and the
    /// process's threads and descriptors must come back to the warmed-up baseline: something kept per runner or per
    /// generation would grow with the turns. (The soak showed afmd's memory stepping at kills and swaps.)
    @Test func killsAndSwapsFreeEveryGenerationAndRunnerHost() async throws {
        let policy = RestartPolicy(initialDelay: .milliseconds(10), maximumDelay: .milliseconds(10), stableAfter: .zero)
        let directory = BackendDirectoryBuilder()
        try directory.addCFixture(hosting: "runner")
        let harness = RegistryHarness(directory: directory, settings: ["c-fixture": ["Turn": "0"]], restartPolicy: policy)
        await harness.registry.loadAll()
        #expect(harness.status("c-fixture")?.state == "ready")
        var seen: [Weak] = []
        func turn(_ number: Int) async throws {
            let pid = try #require(
                harness.status("c-fixture")?.runnerPID, "turn \(number): \(harness.sink.capturedLines.suffix(16).joined(separator: "\n"))")
            let lease = try harness.registry.lease(model: "c-echo")
            seen.append(Weak(lease.generation))
            #expect(text(of: await collect(try lease.start(requestDocument: requestDocument(model: "c-echo", text: "ok")))) == "ok")
            let streams = try (0..<3).map { _ in try harness.registry.lease(model: "c-slow").start(requestDocument: requestDocument(model: "c-slow")) }
            let readers = streams.map { stream in Task { await collect(stream) } }
            try await Task.sleep(for: .milliseconds(60))
            if number % 2 == 0 {
                kill(pid, SIGKILL)
                for reader in readers {
                    guard case .failed(let code, _)? = await reader.value.last else {
                        Issue.record("a stream on a killed runner did not fail")
                        continue
                    }
                    #expect(code == .backendCrashed)
                }
            } else {
                harness.registry.updateConfiguration { $0.settings["c-fixture"] = ["Turn": String(number)] }
                _ = try await harness.registry.reload("c-fixture")
                for stream in streams { stream.cancel() }
                for reader in readers { _ = await reader.value }
            }
            // One status read: two could see "ready" from before the exit was handled and then no runner at all.
            let back = await eventually(timeout: .seconds(20)) {
                let status = harness.status("c-fixture")
                return status?.state == "ready" && status?.runnerPID != nil && status?.runnerPID != pid
            }
            #expect(back, "turn \(number): \(harness.sink.capturedLines.suffix(12).joined(separator: "\n"))")
        }
        // Ends on a kill: a switch prunes the generations that finished draining (the last reload's until then).
        for number in 0..<5 { try await turn(number) }
        #expect(await eventually { seen.allSatisfy { $0.generation == nil && $0.host == nil } })
        let threads = Self.threadCount(), descriptors = Self.descriptorCount()
        var memory: [Int] = []
        for number in 5..<45 {
            try await turn(number)
            if number % 10 == 4 {
                _ = CurrentProcess.releaseFreeHeapMemory()
                memory.append(Self.anonymousKB())
            }
        }
        let alive = { seen.filter { $0.generation != nil }.count }
        let hostsAlive = { seen.filter { $0.host != nil }.count }
        let settled = await eventually { alive() == 0 && hostsAlive() == 0 }
        let backToBaseline = await eventually { Self.threadCount() <= threads && Self.descriptorCount() <= descriptors }
        print(
            "after 45 turns (23 kills, 22 reloads): generations alive \(alive()) of \(seen.count) (turns \(seen.indices.filter { seen[$0].generation != nil })), hosts alive \(hostsAlive()), "
                + "threads \(threads) → \(Self.threadCount()), fds \(descriptors) → \(Self.descriptorCount()), "
                + "anonymous KiB after trim every 10 turns \(memory)")
        #expect(settled, "generations alive \(alive()), hosts alive \(hostsAlive())")
        #expect(backToBaseline, "threads \(threads) → \(Self.threadCount()), fds \(descriptors) → \(Self.descriptorCount())")
    }
}
