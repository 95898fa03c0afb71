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
        // Watch the termination signals before anything else starts, so a SIGTERM that arrives while backends
        // load (or a millisecond after "listening") is kept, not lost.
        let termination = SignalWaiter(signals: [(SIGTERM, "SIGTERM"), (SIGINT, "SIGINT")])
        let daemon = Daemon(configuration: configuration, logger: logger)
        do {
            _ = try await daemon.start()
        } catch {
            logger.error("cannot start: \(error)")
            exit(1)
        }
        let signalName = await termination.next()
        logger.info("received \(signalName)")
        await daemon.stop()
        exit(0)
    }
}

/// Delivers termination signals through Dispatch (not an async-signal handler), remembering one that arrives
/// before anyone waits. Used by the main task only; the Dispatch handlers reach it through `Mailbox`.
private final class SignalWaiter {
    /// The first signal and the waiter, shared with the Dispatch handlers.
    private final class Mailbox: Sendable {
        private let state = Mutex<(received: String?, continuation: CheckedContinuation<String, Never>?)>((nil, nil))

        func deliver(_ name: String) {
            let waiting = state.withLock { state -> CheckedContinuation<String, Never>? in
                guard state.received == nil else { return nil }
                state.received = name
                defer { state.continuation = nil }
                return state.continuation
            }
            waiting?.resume(returning: name)
        }

        func next() async -> String {
            await withCheckedContinuation { continuation in
                let already = state.withLock { state -> String? in
                    if let received = state.received { return received }
                    state.continuation = continuation
                    return nil
                }
                if let already { continuation.resume(returning: already) }
            }
        }
    }

    private let mailbox = Mailbox()
    private let sources: [any DispatchSourceSignal]

    init(signals: [(Int32, String)]) {
        let queue = DispatchQueue(label: "afmd.signals")
        let mailbox = self.mailbox
        sources = signals.map { number, name in
            // The default action would kill the process; Dispatch still sees an ignored signal.
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler { mailbox.deliver(name) }
            source.resume()
            return source
        }
    }

    /// The first signal received, waiting for one if none came yet.
    func next() async -> String {
        await mailbox.next()
    }
}
