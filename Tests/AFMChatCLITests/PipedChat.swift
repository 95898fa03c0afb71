// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation

/// A piped `afm chat` (standard input a pipe, output to a file), started by a test.
final class PipedChat {
    let process = Process()
    let input = Pipe()
    let outputPath: String

    init(arguments: [String], scratch: String) throws {
        outputPath = scratch + "/afm-\(UUID().uuidString.prefix(8)).out"
        _ = FileManager.default.createFile(atPath: outputPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: ChatHarness.afm)
        process.arguments = ["chat"] + arguments
        process.standardInput = input
        process.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outputPath))
        process.standardError = process.standardOutput
        try process.run()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    func write(_ text: String) { input.fileHandleForWriting.write(Data(text.utf8)) }

    /// Closes standard input (end of input).
    func closeInput() { try? input.fileHandleForWriting.close() }

    /// Waits for the exit; returns the status, or nil after `seconds`.
    func waitForExit(seconds: Double = 30) -> Int32? {
        guard waitUntil(seconds: seconds, { !process.isRunning }) else { return nil }
        process.waitUntilExit()
        return process.terminationStatus
    }

    var output: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }

    /// User plus system CPU time so far, in clock ticks (/proc/PID/stat fields 14 and 15).
    func cpuTicks() -> Int? {
        let stat = readProcFile("/proc/\(process.processIdentifier)/stat")
        guard let close = stat.lastIndex(of: ")") else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Int(fields[11]), let system = Int(fields[12]) else { return nil }
        return user + system
    }
}
