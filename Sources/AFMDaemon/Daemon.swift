// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMHTTP
import AFMJSON
import AFMLogging
import AFMResponses
import Dispatch
import Foundation
import Synchronization

/// The running gateway: backends, the Responses service and the HTTP listener, started and stopped in order.
///
/// Start: load backends (each failure is recorded, not fatal) → listen. Stop (SIGTERM/SIGINT): close the
/// listener → let in-flight responses finish within the shutdown timeout → drain and destroy backends.
public final class Daemon: Sendable {
    public let configuration: DaemonConfiguration
    public let registry: BackendRegistry
    let server: HTTPServer
    let logger: Logger
    let startedAt = Date()
    private let listening = Mutex<String?>(nil)

    public init(configuration: DaemonConfiguration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        let backendDirectory = configuration.backendDirectory ?? Self.defaultBackendDirectory()
        let registry = BackendRegistry(
            configuration: .init(
                backendDirectory: backendDirectory,
                copyDirectory: (configuration.runtimeDirectory as NSString).appendingPathComponent("backend-copies"),
                stateDirectory: (configuration.stateDirectory as NSString).appendingPathComponent("backends"),
                settings: configuration.backendSettings,
                disabled: configuration.disabledBackends,
                limits: GenerationLimits(silenceLimit: configuration.silenceTimeout, cancelGrace: configuration.cancelGrace),
                drainTimeout: configuration.drainTimeout),
            logger: logger.named("afmd.backends"))
        self.registry = registry
        let service = ResponsesService(
            registry: registry, logger: logger.named("afmd.responses"), commonPrompt: configuration.commonPrompt)
        var http = HTTPServer.Configuration()
        http.requestHeaderTimeout = configuration.requestHeaderTimeout
        http.processingDeadline = configuration.processingDeadline
        let statusBox = StatusBox()
        let handler = APIHandler(registry: registry, service: service, status: { statusBox.render() }, logger: logger.named("afmd.api"))
        self.server = HTTPServer(configuration: http, logger: logger.named("afmd.http")) { request, writer in
            await handler.handle(request, writer)
        }
        statusBox.set(self)
    }

    /// Loads backends and starts listening. Returns the bound address.
    ///
    /// - Throws: the listener's error (address in use, bad host), with the address in its message.
    public func start() async throws -> ListenAddress {
        logger.info("starting", ["version": AFMVersion.string, "abi": "\(AFMVersion.abiMajor).\(AFMVersion.abiMinor)", "backend_dir": configuration.backendDirectory ?? Self.defaultBackendDirectory()])
        await registry.loadAll()
        let port = try server.start(host: configuration.listen.host, port: configuration.listen.port)
        let address = ListenAddress(host: configuration.listen.host, port: port)
        listening.withLock { $0 = address.description }
        logger.info("listening on \(address)")
        return address
    }

    /// Graceful stop: no new connections, in-flight responses finish (up to the shutdown timeout), backends drain.
    public func stop() async {
        logger.info("stopping: draining in-flight requests", ["timeout_s": String(configuration.shutdownTimeout.components.seconds)])
        await server.shutdown(deadline: configuration.shutdownTimeout)
        await registry.drainAll(deadline: .seconds(2))
        logger.info("stopped")
    }

    /// The `/status` document.
    func statusDocument() -> JSONValue {
        let backends = registry.statuses()
        let models = registry.models().map { entry -> JSONValue in
            [
                "id": .string(entry.model.id), "backend": .string(entry.backend), "available": .bool(entry.available),
                "context_tokens": .number(JSONNumber(entry.model.contextTokens)),
                "budgets": [
                    "max_input_tokens": .number(JSONNumber(entry.model.maxInputTokens)),
                    "max_output_tokens": .number(JSONNumber(entry.model.maxOutputTokens)),
                ],
                "capabilities": entry.model.capabilities.json,
            ]
        }
        return [
            "version": .string(AFMVersion.string),
            "abi": .string("\(AFMVersion.abiMajor).\(AFMVersion.abiMinor)"),
            "pid": .number(JSONNumber(Int(getpid()))),
            "uptime_seconds": .number(JSONNumber(Int(Date().timeIntervalSince(startedAt)))),
            "listen": listening.withLock { $0.map(JSONValue.string) ?? nil },
            "backends": .array(backends.map(\.json)),
            "models": .array(models),
        ]
    }

    /// `<dir of executable>/../lib/afm/backends` when installed, else `<dir of executable>/backends`.
    static func defaultBackendDirectory() -> String {
        let executable = (CommandLine.arguments.first.map { ($0 as NSString).resolvingSymlinksInPath } ?? "/usr/sbin/afmd")
        let directory = (executable as NSString).deletingLastPathComponent
        let installed = ((directory as NSString).appendingPathComponent("../lib/afm/backends") as NSString).standardizingPath
        if FileManager.default.fileExists(atPath: installed) { return installed }
        return (directory as NSString).appendingPathComponent("backends")
    }
}

/// Breaks the init-order cycle between the handler (which renders status) and the daemon (which owns the handler).
private final class StatusBox: Sendable {
    private let daemon = Mutex<Daemon?>(nil)
    func set(_ value: Daemon) { daemon.withLock { $0 = value } }
    func render() -> JSONValue { daemon.withLock { $0 }?.statusDocument() ?? ["status": "starting"] }
}
