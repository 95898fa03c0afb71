// SPDX-License-Identifier: Apache-2.0
import Foundation

/// What a finished command left: its exit status and its standard output and error, interleaved as written.
public struct CommandOutput: Sendable {
    /// The exit status (or the signal number, for a command a signal ended).
    public var status: Int32
    /// Standard output and standard error together, decoded as UTF-8 (invalid bytes replaced).
    public var output: String

    /// Runs `executable` with `arguments` to its end and collects what it printed.
    ///
    /// Blocks the calling thread until the command exits: call it from a test's own thread or through the
    /// suites' off-pool helpers, never from code on the cooperative pool that other tasks wait for.
    /// - Parameters:
    ///   - environment: the whole environment of the command; `nil` inherits the test process's.
    /// - Throws: when the command cannot be started.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws -> CommandOutput {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return CommandOutput(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
    }
}
