// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMDaemon
import AFMLogging
import Dispatch
import Foundation
import Synchronization

/// `afmd`: wiring only. Parse the command line, build the daemon, run until SIGTERM/SIGINT.
@main
struct AFMDMain {
    static func main() async {
        let options: DaemonOptions
        do {
            options = try DaemonOptions(arguments: Array(CommandLine.arguments.dropFirst()))
        } catch {
            FileHandle.standardError.write(Data("Error: \(error.message)\n".utf8))
            exit(64)
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
                FileHandle.standardError.write(Data("Error: --log-level must be debug, info, warning or error\n".utf8))
                exit(64)
            }
            level = parsed
        }
        let logger = Logger(label: "afmd", level: level)
        let configuration: DaemonConfiguration
        do {
            configuration = try DaemonConfiguration(options: options, environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data("Error: \(error.description)\n".utf8))
            exit(78)  // EX_CONFIG
        }

        // Writes to a closed socket must fail with EPIPE, not kill the daemon.
        signal(SIGPIPE, SIG_IGN)
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        let daemon = Daemon(configuration: configuration, logger: logger)
        do {
            _ = try await daemon.start()
        } catch {
            logger.error("cannot start: \(error)")
            exit(1)
        }
        let signalName = await waitForTerminationSignal()
        logger.info("received \(signalName)")
        await daemon.stop()
        exit(0)
    }

    /// Suspends until SIGTERM or SIGINT arrives (delivered through Dispatch, not an async-signal handler).
    static func waitForTerminationSignal() async -> String {
        let waiter = SignalWaiter()
        return await withCheckedContinuation { continuation in
            waiter.wait(for: [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")], continuation: continuation)
        }
    }
}

/// Turns the first of several signals into the resumption of one continuation.
private final class SignalWaiter: Sendable {
    private let state = Mutex<(sources: [any DispatchSourceSignal], continuation: CheckedContinuation<String, Never>?)>(([], nil))
    private let queue = DispatchQueue(label: "afmd.signals")

    func wait(for signals: [(Int32, String)], continuation: CheckedContinuation<String, Never>) {
        let sources = signals.map { number, name -> any DispatchSourceSignal in
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { [self] in
                let pending = state.withLock { state in
                    defer { state.continuation = nil }
                    return state.continuation
                }
                pending?.resume(returning: name)
            }
            return source
        }
        state.withLock { $0 = (sources, continuation) }
        for source in sources { source.resume() }
    }
}
