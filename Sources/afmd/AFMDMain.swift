// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMCore
import AFMDaemon
import AFMLogging
import AFMSystem
import Dispatch
import Foundation
import Synchronization

/// `afmd`: wiring only. Parse the command line, build the daemon, run until SIGTERM/SIGINT.
@main
struct AFMDMain {
    /// Synchronous on purpose. Its first line runs before the process has any other thread, so the signal block
    /// reaches every thread; then the main thread just waits while `run()` (which ends the process) works.
    ///
    /// Not `async`, and not `dispatchMain()`: on Linux both park the main thread in `sigsuspend` with an empty
    /// mask, so a process-directed `SIGTERM` went to the main thread — discarded under `SIG_IGN` (a `SIGTERM`
    /// sent right after start was lost and the daemon never stopped), or fatal under `SIG_DFL`.
    static func main() {
        // The mask a starter left (a libdispatch worker blocks nearly everything) is dropped first; then exactly the
        // signals the listener thread takes with sigwait are blocked.
        InheritedSignals.reset()
        SignalListener.blockInCallingThread([SIGTERM, SIGINT, SIGHUP])
        Task.detached { await run() }
        DispatchSemaphore(value: 0).wait()  // never signalled: run() exits the process
    }

    /// Writes `Error: MESSAGE` to stderr, control characters escaped (the message may quote a config file or the
    /// control file), and exits with `status`.
    private static func fail(_ message: String, status: Int32) -> Never {
        FileHandle.standardError.write(Data("Error: \(TerminalSafeText.neutralized(message))\n".utf8))
        exit(status)
    }

    nonisolated static func run() async -> Never {
        let options: DaemonOptions
        do {
            options = try DaemonOptions(arguments: Array(CommandLine.arguments.dropFirst()))
        } catch {
            fail(error.message, status: 64)
        }
        if options.showHelp {
            print(DaemonOptions.help)
            exit(0)
        }
        if options.showVersion {
            print("afmd \(AFMVersion.string) (backend ABI \(AFMVersion.abiMajor).\(AFMVersion.abiMinor))")
            exit(0)
        }
        var level = Logger.Level.info
        if let name = options.logLevel {
            guard let parsed = Logger.Level(name: name) else {
                fail("--log-level must be debug, info, warning or error", status: 64)
            }
            level = parsed
        }
        let logger = Logger(label: "afmd", level: level)
        let environment = ProcessInfo.processInfo.environment
        let paths = ConfigPaths.resolve(configRoot: options.configRoot, configFile: options.configFile, environment: environment)
        // Without HOME and a user-database entry the config would come from /tmp/afm-home-UID: only when it is ours.
        do {
            try paths.prepareHomeDirectory()
        } catch {
            fail(error.description, status: 77)  // EX_NOPERM
        }
        var commandLine: [ConfigurationLoader.CommandLineValue] = []
        do {
            if let listen = options.listen { commandLine.append(try .init(flag: "--listen", value: listen)) }
            if let directory = options.backendDirectory { commandLine.append(try .init(flag: "--backend-dir", value: directory)) }
            if let socket = options.adminSocket { commandLine.append(try .init(flag: "--admin-socket", value: socket)) }
        } catch {
            fail(error.description, status: 64)
        }
        let loader = ConfigurationLoader(paths: paths, environment: environment, commandLine: commandLine)
        // Fatal errors below quote paths and values from files and the environment: printed one line each, with
        // their control characters escaped, like the logger's lines.
        if options.checkConfig {
            let check = ConfigCheck(loader: loader)
            print(check.report)
            exit(check.exitStatus)
        }
        let loaded: LoadedConfiguration
        do {
            loaded = try loader.load()
        } catch {
            fail(error.description, status: 78)  // EX_CONFIG
        }
        for warning in loaded.warnings { logger.warning(warning) }
        // Backend runners run as this user: keep them (and any other process of it) out of this one's memory.
        do {
            try CurrentProcess.forbidInspection()
        } catch {
            logger.warning("cannot make afmd undumpable: \(error)")
        }
        // Before the admin socket and the backend copies go there: a /tmp/afm-UID made by another user is refused.
        do {
            try paths.prepareRuntimeDirectory()
        } catch {
            fail(error.description, status: 77)  // EX_NOPERM
        }

        // Writes to a closed socket must fail with EPIPE, not kill the daemon.
        signal(SIGPIPE, SIG_IGN)
        // Watch the signals before anything else starts; one that arrived earlier is still pending (blocked
        // since the first line of main), so none is lost.
        let signals: SignalWaiter
        do {
            signals = try SignalWaiter(signals: [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT"), (SIGHUP, "SIGHUP")])
        } catch {
            logger.error("cannot start the signal thread: \(error)")
            exit(71)
        }
        let daemon = Daemon(loader: loader, loaded: loaded, environment: environment, logger: logger)
        do {
            try await daemon.start()
        } catch {
            logger.error("cannot start: \(error)")
            exit(1)
        }
        for await name in signals.stream {
            logger.info("received \(name)")
            if name == "SIGHUP" {
                do {
                    _ = try await daemon.reload()
                } catch {
                    logger.error("reload failed: \(error)")
                }
                continue
            }
            break
        }
        await daemon.stop()
        exit(0)
    }
}

/// Delivers signals (blocked in every thread, taken by `SignalListener`'s `sigwait` thread) as an `AsyncStream`,
/// so signals that arrive before anyone iterates are buffered, not lost.
private final class SignalWaiter {
    let stream: AsyncStream<String>

    init(signals: [(Int32, String)]) throws(SystemCallError) {
        let (stream, continuation) = AsyncStream<String>.makeStream()
        self.stream = stream
        let names = Dictionary(uniqueKeysWithValues: signals)
        try SignalListener.start(signals.map(\.0)) { number in
            continuation.yield(names[number] ?? "signal \(number)")
        }
    }
}
