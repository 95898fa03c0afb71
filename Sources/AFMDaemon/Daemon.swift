// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMBackends
import AFMConfig
import AFMCore
import AFMHTTP
import AFMJSON
import AFMLogging
import AFMResponses
import AFMSystem
import Foundation
import Synchronization

/// The running gateway: configuration, backends, the Responses service, the HTTP listener and the admin socket,
/// started, reloaded and stopped in order.
///
/// ```
/// start:  load backends (failures recorded, not fatal) → listen → admin socket → READY=1
/// reload: RELOADING=1 → load config (a failure keeps the running one) → reload changed backends → READY=1
/// stop:   STOPPING=1 → /ready 503 → DrainDelaySeconds → close the listener → in-flight responses finish
///         (shutdown timeout) → backends drain
/// ```
public final class Daemon: Sendable {
    let loader: ConfigurationLoader
    let registry: BackendRegistry
    let service: ResponsesService
    let server: HTTPServer
    let settings: SettingsStore?
    let notifier: SystemdNotifier
    let logger: Logger
    /// The `Host`/`Origin` checks in force (replaced on a reload and when the listener moves).
    let browserPolicy: BrowserRequestPolicy.Shared
    /// API keys and the drain flag.
    let gate = APIGate()
    /// The listening sockets systemd passed (socket activation), taken by the first start of the listener.
    private let activated: Mutex<[SystemdSocketActivation.Socket]>
    /// When the daemon was built (wall clock, for display).
    let startedAt = Date()
    /// The same moment on the monotonic clock: the uptime does not move when the wall clock is stepped (NTP).
    private let startedInstant = ContinuousClock.now
    private let state: Mutex<State>
    private let admin = Mutex<AdminServer?>(nil)
    private let refresher = Mutex<Task<Void, Never>?>(nil)
    /// How often backends are asked to describe themselves again (availability, quota, upstream health).
    static let describeInterval: Duration = .seconds(5)

    struct State {
        var loaded: LoadedConfiguration
        var configuration: DaemonConfiguration
        var configGeneration = 1
        var lastReloadError: String?
        /// The address the listener is bound to, or nil when it is not listening.
        var listening: ListenAddress?
        /// The address the exposure rule judges: `listening`, or for a systemd TCP socket the address it is bound
        /// to (`listening` says only "systemd"). Nil when not listening.
        var served: ListenAddress?
        /// Whether the listener is a socket systemd passed (served whatever `Listen` says).
        var adopted = false
        /// A Unix socket file afmd made for the listener (removed when the listener closes).
        var ownSocketFile: String?
        /// A stop through the admin socket lasts until a start through it, or a restart.
        var stoppedByOperator = false
        /// How many `afmctl listener start`s there were: a drain that sees it change was undone while it ran.
        var listenerStarts = 0
        /// Set when ``stop()`` begins: from then on the listener is not started again.
        var stopping = false
        var bindFailure: String?
    }

    /// The configuration in force.
    public var configuration: DaemonConfiguration { state.withLock { $0.configuration } }
    /// The loaded configuration in force, with origins.
    public var loadedConfiguration: LoadedConfiguration { state.withLock { $0.loaded } }

    public convenience init(loader: ConfigurationLoader, loaded: LoadedConfiguration, environment: [String: String], logger: Logger) {
        self.init(
            loader: loader, loaded: loaded, environment: environment, logger: logger,
            settings: try? SettingsStore(path: loaded.paths.controlFile))
    }

    /// Builds the daemon around a given settings store: tests pass one whose writer fails at a chosen step.
    init(
        loader: ConfigurationLoader, loaded: LoadedConfiguration, environment: [String: String], logger: Logger,
        settings: SettingsStore?
    ) {
        self.loader = loader
        self.logger = logger
        self.notifier = SystemdNotifier(environment: environment)
        self.activated = Mutex(SystemdSocketActivation.listeningSockets(environment: environment))
        let configuration = DaemonConfiguration(loaded)
        self.state = Mutex(State(loaded: loaded, configuration: configuration))
        self.settings = settings
        let backendDirectory = configuration.backendDirectory ?? Self.defaultBackendDirectory()
        let registry = BackendRegistry(
            configuration: Self.registryConfiguration(configuration, backendDirectory: backendDirectory),
            logger: logger.named("afmd.backends"))
        self.registry = registry
        let service = ResponsesService(
            registry: registry, logger: logger.named("afmd.responses"), commonPrompt: configuration.commonPrompt,
            maxOutputBytes: configuration.maxOutputBytes)
        self.service = service
        var http = HTTPServer.Configuration()
        http.requestHeaderTimeout = configuration.requestHeaderTimeout
        http.processingDeadline = configuration.processingDeadline
        http.processingDeadlineGrace = Self.processingDeadlineGrace(configuration)
        http.ioThreadCount = configuration.ioThreads
        http.errorBody = Self.httpErrorBody
        http.maxConnections = Self.fitConnectionLimit(
            configuration.maxConnections, refusalHeadroom: http.refusalHeadroom, logger: logger)
        let statusBox = StatusBox()
        let browserPolicy = BrowserRequestPolicy.Shared(configuration.browserPolicy(listenHost: Self.policyHost(configuration.listen)))
        self.browserPolicy = browserPolicy
        let handler = APIHandler(
            registry: registry, service: service, status: { statusBox.render() }, browserPolicy: browserPolicy, gate: gate,
            logger: logger.named("afmd.api"))
        self.server = HTTPServer(configuration: http, logger: logger.named("afmd.http")) { request, writer in
            handler.start(request, writer)
        }
        statusBox.set(self)
    }

    /// How long a stream cut by the processing deadline may still write: it ends with its dialect's failure event
    /// once the backend stopped, so it has the backends' cancel grace (after which the watchdog ends the generation)
    /// and a second more to write it. A reload that changes `CancelGraceSeconds` changes it too.
    static func processingDeadlineGrace(_ configuration: DaemonConfiguration) -> Duration {
        configuration.cancelGrace + .seconds(1)
    }

    /// Descriptors kept free for everything but HTTP connections: backends and their runners, model files, the
    /// admin socket and its clients, the event loops.
    static let reservedDescriptors = 256

    /// Raises the soft `RLIMIT_NOFILE` so `wanted` connections (plus the refusal headroom and the reserve) fit; when
    /// the hard limit is too low, returns the most connections it allows and says so: refusing with 503 at a known
    /// count beats failing `accept` (or opening a model file) with EMFILE at an unknown one.
    /// The body of an error the HTTP server raises itself (413, 431, 417, 501, 408, 504): Anthropic's envelope on a
    /// path under `/v1/messages` (docs/anthropic-messages.md, "Errors"), the server's default (OpenAI's) elsewhere.
    /// The path is known once the request line is complete, before any header field is parsed.
    @Sendable static func httpErrorBody(path: String?, status: Int, code: String, message: String) -> [UInt8]? {
        guard let path, APIDialect(path: path) == .messages else { return nil }
        let envelope: JSONValue = ["type": "error", "error": ["type": .string(AFMErrorCode.anthropicType(forStatus: status)), "message": .string(message)]]
        return envelope.encoded()
    }

    static func fitConnectionLimit(_ wanted: Int, refusalHeadroom: Int, logger: Logger) -> Int {
        let needed = UInt64(wanted + refusalHeadroom + reservedDescriptors)
        let soft = ResourceLimits.raiseOpenFilesSoftLimit(to: needed)
        guard soft < needed else { return wanted }
        let fitting = max(1, Int(soft) - refusalHeadroom - reservedDescriptors)
        logger.warning(
            "the open-file limit is too low for Server.MaxConnections; serving fewer connections",
            ["MaxConnections": "\(wanted)", "RLIMIT_NOFILE": "\(soft)", "connections": "\(fitting)"])
        return fitting
    }

    static func registryConfiguration(_ configuration: DaemonConfiguration, backendDirectory: String) -> BackendRegistry.Configuration {
        var registry = BackendRegistry.Configuration(
            backendDirectory: backendDirectory,
            copyDirectory: (configuration.runtimeDirectory as NSString).appendingPathComponent("backend-copies"),
            stateDirectory: (configuration.stateDirectory as NSString).appendingPathComponent("backends"),
            settings: configuration.backendSettings,
            disabled: configuration.disabledBackends,
            limits: GenerationLimits(silenceLimit: configuration.silenceTimeout, cancelGrace: configuration.cancelGrace),
            drainTimeout: configuration.drainTimeout)
        registry.preferPrivateCloud = configuration.preferPrivateCloud
        registry.privateDirectory = configuration.runtimeDirectoryMustBePrivate ? configuration.runtimeDirectory : nil
        return registry
    }

    // MARK: - Start and stop

    /// Loads backends, starts listening and opens the admin socket. Returns the bound address (nil when a saved
    /// listen address could not be bound: the failure is in the status and the daemon stays up).
    ///
    /// - Throws: the listener's error for an address from the config file or command line (address in use, bad
    ///   host), and admin-socket errors.
    @discardableResult
    public func start() async throws -> ListenAddress? {
        let configuration = self.configuration
        logger.info(
            "starting",
            [
                "version": AFMVersion.string, "abi": "\(AFMVersion.abiMajor).\(AFMVersion.abiMinor)",
                "backend_dir": configuration.backendDirectory ?? Self.defaultBackendDirectory(),
                "state_dir": configuration.stateDirectory,
            ])
        if let problem = configuration.admissionProblem { throw DaemonStartError(message: problem) }
        do throws(APIKeys.FileError) {
            try applyServing(configuration)
        } catch {
            throw DaemonStartError(message: "API keys: \(error)")
        }
        await registry.loadAll()
        var bound: ListenAddress?
        do {
            bound = try bind(configuration.listen)
        } catch {
            guard configuration.listenFromControlLayer else { throw error }
            // A saved LAN address whose interface is missing right now: keep the setting, report the failure.
            logger.error("cannot listen on the saved address; the listener stays stopped", ["address": configuration.listen.description, "error": "\(error)"])
        }
        try startAdmin(configuration)
        let registry = self.registry
        refresher.withLock {
            $0 = Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.describeInterval)
                    if Task.isCancelled { break }
                    await registry.refreshDescriptions()
                }
            }
        }
        notifier.notify("READY=1\nSTATUS=serving")
        return bound
    }

    /// Puts the keys, the metrics' key requirement, the access log and the admission limits of `configuration` in
    /// force. Nothing changes when the key file cannot be used.
    private func applyServing(_ configuration: DaemonConfiguration) throws(APIKeys.FileError) {
        let keys = try configuration.apiKeyFile.map { (path) throws(APIKeys.FileError) in try APIKeys.load(path: path) } ?? .none
        // A reload must not leave a non-loopback listener without keys either (start checks it at bind).
        if !keys.isEnabled, !configuration.allowUnauthenticated, case .tcp(let bound)? = state.withLock({ $0.served }),
            !BrowserRequestPolicy.isLoopbackName(Substring(bound.host))
        {
            throw APIKeys.FileError(
                path: "configuration", line: nil,
                message: "afmd listens on \(bound) and would serve it without API keys; set [Server] APIKeyFile= or AllowUnauthenticated=yes")
        }
        gate.set(APIGate.Settings(keys: keys, metricsRequireKey: configuration.metricsRequireKey))
        service.metrics.setAccessLog(configuration.accessLog ? logger.named("afmd.access") : nil)
        service.admission.setLimits(configuration.admissionLimits)
        if keys.isEnabled { logger.info("API keys in force", ["keys": String(keys.entries.count)]) }
    }

    /// The host the browser checks compare `Host` with: a Unix socket has none, so only loopback names pass.
    static func policyHost(_ address: ListenAddress) -> String { address.hostPort?.host ?? "127.0.0.1" }

    /// Why afmd will not serve `address` with the keys in force, or nil: a non-loopback TCP address needs API keys,
    /// unless `AllowUnauthenticated=yes`.
    func exposureProblem(_ address: ListenAddress) -> String? {
        guard case .tcp(let hostPort) = address, !BrowserRequestPolicy.isLoopbackName(Substring(hostPort.host)) else { return nil }
        guard !gate.current.keys.isEnabled, !configuration.allowUnauthenticated else { return nil }
        return "refusing to listen on \(hostPort) without API keys: anyone who can reach it could use every model. "
            + "Set [Server] APIKeyFile= (see afmd(8)), or AllowUnauthenticated=yes when a proxy in front authenticates"
    }

    private func bind(_ address: ListenAddress) throws -> ListenAddress {
        do {
            let bound: ListenAddress
            var served: ListenAddress?
            var ownSocketFile: String?
            var adopted = false
            // The passed socket stays in `activated`: the listener serves a copy of its descriptor, so after a stop or
            // a drain `afmctl listener start` serves systemd's socket again (never Listen, which systemd ignores).
            if let socket = activated.withLock({ $0.first }) {
                // systemd made and bound it (afmd.socket): serve it whatever Listen says, under Listen's rule: a
                // non-loopback TCP address needs API keys (the socket's address counts, not Listen's).
                if !socket.isUnix {
                    // An address that cannot be read cannot be judged: refused rather than served unchecked.
                    guard let local = try? socket.descriptor.localAddress() else {
                        throw DaemonStartError(message: "systemd socket \(socket.name): cannot read the address it is bound to")
                    }
                    let address = ListenAddress.tcp(HostPort(host: local.host, port: local.port))
                    if let problem = exposureProblem(address) {
                        throw DaemonStartError(message: "systemd socket \(socket.name): \(problem)")
                    }
                    served = address
                }
                // Set first: the listener answers as soon as it is bound. The socket's address, not Listen's: on
                // 0.0.0.0 a request naming the machine by an IP address is one of ours.
                browserPolicy.set(configuration.browserPolicy(listenHost: served.map(Self.policyHost) ?? "127.0.0.1"))
                let port = try server.start(adopting: try socket.descriptor.duplicate(), name: "systemd socket \(socket.name)")
                adopted = true
                bound = socket.isUnix ? .unix(path: "(systemd socket \(socket.name))") : .tcp(HostPort(host: "systemd", port: port ?? 0))
            } else {
                // Listen is judged only when it is what afmd binds (systemd's socket replaces it).
                if let problem = exposureProblem(address) { throw DaemonStartError(message: problem) }
                browserPolicy.set(configuration.browserPolicy(listenHost: Self.policyHost(address)))
                switch address {
                case .tcp(let hostPort):
                    let port = try server.start(host: hostPort.host, port: hostPort.port)
                    bound = .tcp(HostPort(host: hostPort.host, port: port))
                case .unix(let path):
                    try server.start(unixPath: path, mode: configuration.listenSocketMode)
                    bound = address
                    ownSocketFile = path
                }
            }
            state.withLock {
                $0.listening = bound
                $0.served = served ?? bound
                $0.adopted = adopted
                $0.ownSocketFile = ownSocketFile
                $0.bindFailure = nil
            }
            settings?.recordBindFailure(nil)
            logger.info("listening on \(bound)")
            return bound
        } catch {
            let reason = "\(error)"
            state.withLock { $0.bindFailure = "\(address): \(reason)" }
            settings?.recordBindFailure(.init(address: address.description, reason: reason))
            throw error
        }
    }

    /// Closes the listener at once (``HTTPServer/stopListening()``) and removes the socket file afmd made.
    private func closeListener() {
        server.stopListening()
        removeOwnSocketFile()
    }

    private func removeOwnSocketFile() {
        let path = state.withLock { state -> String? in
            defer { state.ownSocketFile = nil }
            state.listening = nil
            state.served = nil
            state.adopted = false
            return state.ownSocketFile
        }
        if let path { unlink(path) }
    }

    private func startAdmin(_ configuration: DaemonConfiguration) throws {
        let directory = (configuration.adminSocket as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var adminConfiguration = AdminServer.Configuration(
            socketPath: configuration.adminSocket, policy: AdminAccessPolicy(operatorGroups: configuration.operatorGroups))
        if !configuration.adminSocketGroup.isEmpty {
            // A missing group leaves the socket with the daemon's group: narrower than asked, never wider.
            adminConfiguration.group = UserDatabase.groupID(named: configuration.adminSocketGroup)
            if adminConfiguration.group == nil {
                logger.warning("Admin.SocketGroup names no group; the admin socket keeps the daemon's group", ["group": configuration.adminSocketGroup])
            }
        }
        let server = try AdminServer(configuration: adminConfiguration, handler: DaemonAdminHandler(daemon: self), logger: logger.named("afmd.admin"))
        try server.start()
        admin.withLock { $0 = server }
        logger.info("admin socket ready", ["path": configuration.adminSocket])
    }

    /// Graceful stop: `/ready` answers 503 at once and the listener keeps serving for `DrainDelaySeconds` (a
    /// load balancer's health check notices and sends nothing more), then no new connections, in-flight responses
    /// finish (up to the shutdown timeout), backends drain.
    public func stop() async {
        let timeout = configuration.shutdownTimeout
        state.withLock { $0.stopping = true }
        notifier.notify("STOPPING=1")
        await drainDelay()
        logger.info("stopping: draining in-flight requests", ["timeout_s": String(timeout.components.seconds)])
        await server.shutdown(deadline: timeout)
        removeOwnSocketFile()
        refresher.withLock { $0?.cancel() }
        if let admin = admin.withLock({ $0 }) { await admin.stop() }
        await registry.drainAll(deadline: .seconds(2))
        logger.info("stopped")
    }

    // MARK: - Listener

    /// `/ready` turns 503 now; the listener keeps serving for `DrainDelaySeconds` so a balancer's health check
    /// notices before connections are refused.
    private func drainDelay() async {
        gate.setDraining(true)
        let delay = configuration.drainDelay
        guard delay > .zero, state.withLock({ $0.listening != nil }) else { return }
        logger.info("draining: /ready answers 503; the listener closes after the drain delay", ["delay_s": String(delay.components.seconds)])
        try? await Task.sleep(for: delay)
    }

    /// `afmctl drain`: what SIGTERM does, without exiting. `/ready` answers 503 at once; after `DrainDelaySeconds`
    /// the listener closes and in-flight responses finish. `afmctl listener start` undoes it.
    public func drain() async -> JSONValue {
        let starts = state.withLock { $0.listenerStarts }
        await drainDelay()
        // A start during the delay ended the drain (it found the listener open and left it so): nothing to close.
        guard state.withLock({ $0.listenerStarts }) == starts else { return listenerJSON }
        await server.shutdown(deadline: configuration.shutdownTimeout)
        removeOwnSocketFile()
        let startedMeanwhile = state.withLock { state -> Bool in
            guard state.listenerStarts == starts else { return true }
            state.stoppedByOperator = true
            return false
        }
        if startedMeanwhile {
            // A start while in-flight responses finished found the listener still open: open it again now.
            _ = try? setListener(running: true)
        } else {
            logger.info("drained: the listener is closed until afmctl listener start")
        }
        return listenerJSON
    }

    /// Starts or stops the HTTP listener. Stopping closes the listener and every accepted socket; it lasts until
    /// the next start through the admin socket or a restart (a reload does not undo it). Starting also ends a drain.
    public func setListener(running: Bool) throws -> JSONValue {
        if running {
            // Stopping (SIGTERM): a start would make /ready 200 again, or reopen the listener, just before the exit.
            if state.withLock({ $0.stopping }) { throw DaemonStartError(message: "afmd is stopping") }
            let address = state.withLock { state -> ListenAddress? in
                state.stoppedByOperator = false
                state.listenerStarts += 1
                return state.listening == nil ? state.configuration.listen : nil
            }
            if let address { _ = try bind(address) }
            gate.setDraining(false)
        } else {
            closeListener()
            state.withLock { $0.stoppedByOperator = true }
            logger.info("listener stopped by an operator")
        }
        return listenerJSON
    }

    var listenerJSON: JSONValue {
        state.withLock { state in
            [
                "state": .string(
                    gate.isDraining ? "draining" : state.listening != nil ? "running" : state.stoppedByOperator ? "stopped" : "failed"),
                "address": state.listening.map { .string($0.description) } ?? .string(state.configuration.listen.description),
                "stopped_by_operator": .bool(state.stoppedByOperator),
                "bind_failure": state.bindFailure.map(JSONValue.string) ?? nil,
                "connections": .number(JSONNumber(server.activeConnectionCount)),
            ]
        }
    }

    /// Moves the listener to `address` (a saved setting changed), unless an operator stopped it.
    func rebindIfNeeded(to address: ListenAddress) {
        let current = state.withLock { state -> (ListenAddress?, Bool) in (state.listening, state.stoppedByOperator) }
        guard !current.1 else { return }
        // systemd's socket is served whatever Listen says: a reload or a saved address must not close it (before,
        // every reload did, and afmd then listened on Listen while afmd.socket's connections waited unanswered).
        if current.0 != nil, state.withLock({ $0.adopted }) {
            logger.info("serving the socket systemd passed; Listen applies when afmd starts without one", ["listen": address.description])
            return
        }
        if let listening = current.0 {
            switch (listening, address) {
            case (.tcp(let now), .tcp(let wanted)):
                if now.host == wanted.host && (wanted.port == 0 || now.port == wanted.port) { return }
            case (.unix(let now), .unix(let wanted)):
                if now == wanted { return }
            default:
                break
            }
        }
        closeListener()
        do {
            _ = try bind(address)
        } catch {
            logger.error("cannot listen on the new address; the setting is kept", ["address": address.description, "error": "\(error)"])
        }
    }

    // MARK: - Reload

    /// Reloads the configuration (all layers) and then every backend whose settings, model file or library
    /// changed; with `backend`, reloads just that backend (even when nothing changed).
    ///
    /// - Throws: `ReloadError` when the configuration is invalid (the running one stays) or the named backend
    ///   failed (its previous generation stays active).
    public func reload(backend: String? = nil) async throws(ReloadError) -> JSONValue {
        notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())")
        defer { notifier.notify("READY=1\nSTATUS=serving") }
        if let backend {
            let active = registry.statuses().first { $0.id == backend }?.generation
            do {
                let generation = try await registry.reload(backend)
                return ["backend": .string(backend), "generation": .number(JSONNumber(Int(generation)))]
            } catch {
                throw ReloadError(reason: error.description, backend: backend, activeGeneration: active.map(Int.init))
            }
        }
        let loaded: LoadedConfiguration
        do {
            loaded = try loader.load()
        } catch {
            state.withLock { $0.lastReloadError = error.description }
            logger.error("configuration reload failed; the running configuration stays", ["error": error.description])
            throw ReloadError(reason: error.description, backend: nil, activeGeneration: state.withLock { $0.configGeneration })
        }
        // The control file may have been edited by hand: the store must start its next edit (and answer GetPrompt's
        // revision) from what was just loaded, not from its copy of the last write. The file just parsed, so a
        // failure here is a race with another edit of it; the next edit re-reads it anyway.
        _ = try? await settings?.reload()
        let configuration = DaemonConfiguration(loaded)
        do throws(APIKeys.FileError) {
            if let problem = configuration.admissionProblem { throw APIKeys.FileError(path: "configuration", line: nil, message: problem) }
            try applyServing(configuration)
        } catch {
            state.withLock { $0.lastReloadError = error.description }
            logger.error("configuration reload failed; the running configuration stays", ["error": error.description])
            throw ReloadError(reason: error.description, backend: nil, activeGeneration: state.withLock { $0.configGeneration })
        }
        let generation = state.withLock { state -> Int in
            state.loaded = loaded
            state.configuration = configuration
            state.configGeneration += 1
            state.lastReloadError = nil
            return state.configGeneration
        }
        let backendDirectory = configuration.backendDirectory ?? Self.defaultBackendDirectory()
        let registryConfiguration = Self.registryConfiguration(configuration, backendDirectory: backendDirectory)
        registry.updateConfiguration { $0 = registryConfiguration }
        service.setCommonPrompt(configuration.commonPrompt)
        // `served`: a systemd socket's own address (`listening` says only "systemd").
        let listenHost = Self.policyHost(state.withLock { $0.served } ?? configuration.listen)
        browserPolicy.set(configuration.browserPolicy(listenHost: listenHost))
        service.setMaxOutputBytes(configuration.maxOutputBytes)
        // The deadline and its grace apply to requests already running too (the grace follows CancelGraceSeconds:
        // it was the one of start-up, and a longer cancel grace had streams cut before their failure event), as the
        // cancel grace does to running streams (`registry.updateConfiguration` above): a stream's two graces change
        // together, so a shorter one cannot cut it before its watchdog's failure event.
        server.setProcessingDeadline(configuration.processingDeadline, grace: Self.processingDeadlineGrace(configuration))
        rebindIfNeeded(to: configuration.listen)
        let outcomes = await registry.reloadChanged()
        var backends: [JSONValue] = []
        for (id, outcome) in outcomes {
            switch outcome {
            case .unchanged(let generation):
                backends.append(["backend": .string(id), "outcome": "unchanged", "generation": generation.map { .number(JSONNumber(Int($0))) } ?? nil])
            case .reloaded(let generation):
                backends.append(["backend": .string(id), "outcome": "reloaded", "generation": .number(JSONNumber(Int(generation)))])
            case .failed(let error, let active):
                backends.append([
                    "backend": .string(id), "outcome": "failed", "reason": .string(error.description),
                    "active_generation": active.map { .number(JSONNumber(Int($0))) } ?? nil,
                ])
            }
        }
        logger.info("configuration reloaded", ["generation": String(generation)])
        // A reload builds and drops a generation's worth of documents, settings and backend state; glibc keeps the
        // freed memory in its arenas (afmd's resident memory then steps up at reloads and never comes down). Hand it
        // back, off the reload's path.
        DispatchQueue.global(qos: .utility).async { CurrentProcess.releaseFreeHeapMemory() }
        return ["config_generation": .number(JSONNumber(generation)), "backends": .array(backends)]
    }

    // MARK: - Status

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
        let (generation, reloadError) = state.withLock { ($0.configGeneration, $0.lastReloadError) }
        return [
            "version": .string(AFMVersion.string),
            "abi": .string("\(AFMVersion.abiMajor).\(AFMVersion.abiMinor)"),
            "pid": .number(JSONNumber(Int(getpid()))),
            "uptime_seconds": .number(JSONNumber(Int((ContinuousClock.now - startedInstant).components.seconds))),
            "listen": state.withLock { $0.listening.map { .string($0.description) } ?? nil },
            "listener": listenerJSON,
            "config": ["generation": .number(JSONNumber(generation)), "last_reload_error": reloadError.map(JSONValue.string) ?? nil],
            "backends": .array(backends.map(\.json)),
            "models": .array(models),
            "tokens": service.monitor.json["totals"] ?? nil,
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
    /// Weak: the daemon holds its server, whose handler holds this box, so a strong reference was a cycle that kept
    /// a dropped daemon (LeakSanitizer: SettingsDurabilityTests' daemons at the test process's exit).
    private struct Reference {
        weak var daemon: Daemon?
    }
    private let reference = Mutex(Reference())
    func set(_ value: Daemon) { reference.withLock { $0.daemon = value } }
    func render() -> JSONValue { reference.withLock { $0.daemon }?.statusDocument() ?? ["status": "starting"] }
}
