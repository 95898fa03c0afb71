// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs each check in a child process of its own (this executable with `--run-one CHECK`), so a backend that
/// crashes, aborts or hangs fails the check it was in and the battery goes on. A child past the check's deadline is
/// killed (SIGKILL).
struct CheckRunner {
    var options: CheckOptions

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
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = options.childArguments(for: check)
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        let ended = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in ended.signal() }
        do { try process.run() } catch { return result(false, "cannot start \(executable): \(error)") }
        // Read both pipes while the child runs (a full pipe would block it).
        nonisolated(unsafe) var outputData = Data()
        nonisolated(unsafe) var errorData = Data()
        let readers = DispatchGroup()
        DispatchQueue.global().async(group: readers) { outputData = output.fileHandleForReading.readDataToEndOfFile() }
        DispatchQueue.global().async(group: readers) { errorData = errors.fileHandleForReading.readDataToEndOfFile() }
        var timedOut = false
        if ended.wait(timeout: .now() + check.deadlineSeconds) == .timedOut {
            timedOut = true
            kill(process.processIdentifier, SIGKILL)
            ended.wait()
        }
        readers.wait()
        if timedOut { return result(false, "did not finish within \(Int(check.deadlineSeconds)) s (killed)") }
        let lastLine = String(decoding: outputData, as: UTF8.self).split(separator: "\n").last.map(String.init) ?? ""
        if process.terminationReason == .uncaughtSignal {
            let signal = process.terminationStatus
            let name = strsignal(signal).map { String(cString: $0) } ?? "signal \(signal)"
            return result(false, "the backend crashed the check (\(name))" + Self.tail(errorData))
        }
        guard let value = try? JSONParser.parse(Array(lastLine.utf8)), let passed = value["passed"]?.boolValue else {
            return result(false, "the check exited with status \(process.terminationStatus) without a result" + Self.tail(errorData))
        }
        return result(passed, value["detail"]?.stringValue ?? "")
    }

    /// The last line a child wrote to standard error, as ": …", or "".
    private static func tail(_ data: Data) -> String {
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n")
        return lines.last.map { ": " + String($0.prefix(300)) } ?? ""
    }

    /// The child's side: runs one check in this process and prints its result as one JSON line.
    static func runOne(_ check: ConformanceBattery.Check, _ context: ConformanceBattery.Context) -> Int32 {
        let value: JSONValue
        do {
            let detail = try ConformanceBattery.run(check, context)
            value = .object(JSONObject([("passed", .bool(true)), ("detail", .string(detail))]))
        } catch {
            value = .object(JSONObject([("passed", .bool(false)), ("detail", .string(error.description))]))
        }
        var bytes: [UInt8] = []
        JSONEncoding.append(value, to: &bytes)
        bytes.append(0x0A)
        FileHandle.standardOutput.write(Data(bytes))
        return 0
    }
}
