// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// A real `afmd` process for a test: started on port 0, its port read from its log, stopped with SIGTERM.
public final class DaemonProcess {
    public let process = Process()
    public let root: String
    public let logPath: String
    public private(set) var port = 0
    /// Whether this process owns (a share of) `root`: a root it made, or the one of a daemon it restarts in. The last
    /// owner removes it when it goes (``deinit``).
    private let ownsRoot: Bool

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Starts `afmd --listen 127.0.0.1:0 --config-root ROOT --backend-dir DIR` with `config` as ROOT/afmd.conf.
    ///
    /// - Parameter root: an existing config root to start in again (a restart that keeps the state directory);
    ///   nil makes a new one, removed when this object goes (or, restarted in, when the last daemon that used it goes).
    public init(
        backendDirectory: String, config: String = "", extraArguments: [String] = [], environment: [String: String] = [:],
        root existingRoot: String? = nil, nice: Int? = nil, waitFor marker: String = "listening on 127.0.0.1:"
    ) throws {
        if let existingRoot {
            root = existingRoot
            ownsRoot = TestPaths.retainOwnedDirectory(existingRoot)
        } else {
            root = TestPaths.makeOwnedTemporaryDirectory("afmd-root")
            ownsRoot = true
        }
        logPath = root + "/afmd.log"
        try config.write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        // Tests stop daemons all the time: no drain delay unless a test asks for one (AFM_SERVER_DRAIN_DELAY_SECONDS
        // or a drop-in in ROOT/etc/afm/afmd.conf.d, which shadow this vendor drop-in).
        let vendor = root + "/usr/lib/afm/afmd.conf.d"
        try FileManager.default.createDirectory(atPath: vendor, withIntermediateDirectories: true)
        try "[Server]\nDrainDelaySeconds=0\n".write(toFile: vendor + "/00-tests.conf", atomically: true, encoding: .utf8)
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        // A test that listens elsewhere says so in its config (Listen=unix:…) or with its own --listen.
        let listen = config.contains("Listen=") ? [] : ["--listen", "127.0.0.1:0"]
        let arguments = listen + ["--config-root", root, "--backend-dir", backendDirectory] + extraArguments
        if let nice {
            // nice(1) execs afmd: the process, and so its main thread, starts at that nice value.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/nice")
            process.arguments = ["-n", String(nice), TestPaths.afmd] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: TestPaths.afmd)
            process.arguments = arguments
        }
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        // Started with a mask such as libdispatch's workers have, whichever thread the test runs on: afmd must not
        // keep it (EndpointTests checks what it blocks).
        try SignalState.withBlocked([SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM]) { try process.run() }
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            let log = self.log
            if let range = log.range(of: marker) {
                let digits = log[range.upperBound...].prefix { $0.isNumber }
                port = Int(digits) ?? 0
                return
            }
            if !process.isRunning { throw Failure(description: "afmd exited (\(process.terminationStatus)) during start:\n\(log)") }
            usleep(20_000)
        }
        process.terminate()
        throw Failure(description: "afmd did not log '\(marker)' within 30 s:\n\(log)")
    }

    /// The admin socket of this daemon (`--config-root` puts it under ROOT/run/afm).
    public var adminSocket: String { root + "/run/afm/admin.sock" }

    /// Runs `afmctl --socket <this daemon's socket> ARGS`; returns the exit status and standard output.
    public func afmctl(_ arguments: [String]) throws -> (status: Int32, output: String, errors: String) {
        let ctl = Process()
        ctl.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        ctl.arguments = ["--socket", adminSocket] + arguments
        let output = Pipe()
        let errors = Pipe()
        ctl.standardOutput = output
        ctl.standardError = errors
        try ctl.run()
        let out = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let err = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        ctl.waitUntilExit()
        return (ctl.terminationStatus, out, err)
    }

    /// Everything afmd logged so far. Read with `FileContents`: Foundation's `String(contentsOfFile:)` leaked a
    /// 4 KiB read buffer on many calls for this file, which afmd appends to while it is read (LeakSanitizer,
    /// `make test-asan`: 44 reports from `readBytesFromFile` under this getter).
    public var log: String {
        (try? FileContents.read(path: logPath)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }

    /// Sends SIGTERM and waits for exit; returns the exit status.
    @discardableResult
    public func stop() -> Int32 {
        if process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        if ownsRoot { TestPaths.releaseOwnedDirectory(root) }
    }
}
