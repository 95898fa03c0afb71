// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Runs each check in a child process of its own (this executable with `--run-one CHECK`), so a backend that
/// crashes, aborts or hangs fails the check it was in and the battery goes on. A child past the check's deadline is
/// killed (SIGKILL).
///
/// The child runs in a process group of its own, and its result travels on a descriptor the backend cannot write
/// to (`ChildSide`): the backend's standard output goes to the child's standard error, so a backend that prints
/// cannot corrupt the result. When the child ended, whatever the backend left in its group (a forked helper) is
/// killed and fails the check, and the checker never waits for the end of a pipe a leftover process may hold.
struct CheckRunner {
    var options: CheckOptions

    /// How long the parent waits, after the child ended, for leftover processes to go and for its pipes to close.
    static let settleSeconds = 2.0

    /// Runs every selected check, in order.
    func runAll(report: (CheckResult) -> Void) -> [CheckResult] {
        var results: [CheckResult] = []
        for check in options.checks {
            let result = run(check)
            report(result)
            results.append(result)
        }
        return results
    }

    private func run(_ check: ConformanceBattery.Check) -> CheckResult {
        let started = ContinuousClock.now
        func result(_ passed: Bool, _ detail: String) -> CheckResult {
            CheckResult(name: check.rawValue, passed: passed, detail: detail, seconds: (ContinuousClock.now - started).seconds)
        }
        let executable = CurrentProcess.executablePath() ?? CommandLine.arguments[0]
        var environment = ProcessInfo.processInfo.environment
        // A backend that crashes is reported by signal and its last line on standard error, not the Swift
        // runtime's backtrace of the checker (unless the caller asked for one).
        if environment["SWIFT_BACKTRACE"] == nil { environment["SWIFT_BACKTRACE"] = "enable=no" }
        let child: ChildProcess
        let streams: ChildProcess.StandardStreams
        do {
            (child, streams) = try ChildProcess.spawn(
                command: executable, arguments: options.childArguments(for: check),
                environment: environment.map { "\($0.key)=\($0.value)" },
                directory: nil)
        } catch {
            return result(false, "cannot start \(executable): \(error)")
        }
        streams.input.close()
        // Read both pipes while the child runs (a full pipe would block it), each to its end or until given up.
        let output = PipeReader(streams.output)
        let errors = PipeReader(streams.error)
        let ended = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            child.waitUntilExited()  // not reaped: the pid (and so its process group id) stays reserved until wait()
            ended.signal()
        }
        var timedOut = false
        if ended.wait(timeout: .now() + check.deadlineSeconds) == .timedOut {
            timedOut = true
            kill(-child.pid, SIGKILL)
            child.killImmediately()
            ended.wait()
        }
        // What the backend left behind in the child's group (a forked helper) is killed; it fails the check.
        let leftovers = Self.endGroup(child.pid)
        let status = child.wait()
        // Both pipes close when the child and everything it started ended; a runner the runner check started
        // exits once its channel to the (ended) child closes.
        let outputClosed = output.waitForEnd(seconds: Self.settleSeconds)
        let errorsClosed = errors.waitForEnd(seconds: Self.settleSeconds)
        if timedOut { return result(false, "did not finish within \(Int(check.deadlineSeconds)) s (killed)") }
        if let signal = status?.signal {
            let name = strsignal(signal).map { String(cString: $0) } ?? "signal \(signal)"
            return result(false, "the backend crashed the check (\(name))" + Self.tail(errors.bytes))
        }
        let lastLine = String(decoding: output.bytes, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        guard let value = try? JSONParser.parse(Array(lastLine.utf8)), let passed = value["passed"]?.boolValue else {
            let exit = status.map { "\($0)" } ?? "an unknown status"
            return result(false, "the check ended (\(exit)) without a result" + Self.tail(errors.bytes))
        }
        let detail = value["detail"]?.stringValue ?? ""
        if leftovers {
            return result(
                false, "the backend left a process running after the check (killed it)" + (passed ? "; otherwise: " : ": ") + detail)
        }
        if passed, !outputClosed || !errorsClosed {
            return result(
                false, "a process the backend started outside the check's process group still holds its output; "
                    + "otherwise: " + detail)
        }
        return result(passed, detail)
    }

    /// Kills what is left of the process group `group` (the ended child's), after giving it `settleSeconds` to go.
    ///
    /// - Returns: true when something was left.
    private static func endGroup(_ group: Int32) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(settleSeconds * 1000))
        // kill(-group, 0) would count the unreaped child (a zombie) as a member too: /proc says who is alive.
        while !members(of: group).isEmpty {
            guard ContinuousClock.now < deadline else {
                kill(-group, SIGKILL)
                return true
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
        return false
    }

    /// The live processes (not zombies) of process group `group`, from /proc.
    private static func members(of group: Int32) -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry -> Int32? in
            guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                let close = stat.lastIndex(of: ")")
            else { return nil }
            // After "(comm)": state, ppid, pgrp, …
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, fields[0] != "Z", Int32(fields[2]) == group else { return nil }
            return pid
        }
    }

    /// The last line a child wrote to standard error, as ": …", or "".
    private static func tail(_ data: [UInt8]) -> String {
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        return lines.last.map { ": " + String($0.prefix(300)) } ?? ""
    }

    /// The child's side: runs one check in this process, writes its result as one JSON line on `resultDescriptor`
    /// and ends the process with `_exit` (no exit handlers: a backend's static destructors or unflushed output
    /// cannot touch the result, nor crash a check that already ended).
    static func runOne(_ check: ConformanceBattery.Check, _ context: ConformanceBattery.Context, resultDescriptor: Int32)
        -> Never
    {
        let value: JSONValue
        do {
            let detail = try ConformanceBattery.run(check, context)
            value = .object(JSONObject([("passed", .bool(true)), ("detail", .string(detail))]))
        } catch {
            value = .object(JSONObject([("passed", .bool(false)), ("detail", .string(error.description))]))
        }
        var bytes: [UInt8] = [0x0A]  // a line of its own
        JSONEncoding.append(value, to: &bytes)
        bytes.append(0x0A)
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(resultDescriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { break }
                offset += written
            }
        }
        _exit(0)
    }

    /// The child's descriptors: its standard output becomes the result descriptor, and descriptor 1 (where a
    /// backend's `printf` goes) is pointed at standard error. Call before the backend is loaded.
    ///
    /// - Returns: the result descriptor (close-on-exec, so a runner the check starts does not get it).
    static func divertStandardOutput() -> Int32 {
        let result = fcntl(1, F_DUPFD_CLOEXEC, 10)
        guard result >= 0 else { return 1 }
        dup2(2, 1)
        return result
    }
}

/// Reads a pipe to its end on a thread of its own; the owner may stop waiting for it earlier (the thread then
/// stays blocked until whoever holds the pipe's other end lets go, which is harmless in a short-lived checker).
///
/// It keeps only the last ``keptBytes`` (the checker reads the child's last line of each pipe): a backend may write
/// to its standard output or error as fast as it likes for the whole check, and the checker's memory stayed with
/// every byte of it (1 GiB of output, 1.1 GB resident).
final class PipeReader: Sendable {
    /// How much of the end of a pipe's output is kept: far more than a result line or a last error line.
    static let keptBytes = 1 << 20
    private let data = Mutex<[UInt8]>([])
    private let finished = DispatchSemaphore(value: 0)

    init(_ descriptor: FileDescriptor) {
        Thread.detachNewThread { [self] in
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let count = chunk.withUnsafeMutableBytes { Glibc.read(descriptor.rawValue, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                guard count > 0 else { break }
                data.withLock { kept in
                    kept += chunk[0..<count]
                    // Trimmed once it holds twice what is kept: each byte is moved at most once.
                    if kept.count > 2 * Self.keptBytes { kept.removeFirst(kept.count - Self.keptBytes) }
                }
            }
            descriptor.close()
            finished.signal()
        }
    }

    /// Waits at most `seconds` for the end of the pipe; false when it is still open.
    func waitForEnd(seconds: Double) -> Bool {
        guard finished.wait(timeout: .now() + .milliseconds(Int(seconds * 1000))) == .success else { return false }
        finished.signal()
        return true
    }

    /// The end of what was read so far (at most ``keptBytes``).
    var bytes: [UInt8] { data.withLock { Array($0.suffix(Self.keptBytes)) } }
}
