// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMLogging
import AFMSystem
import Foundation
import Synchronization

/// Every backend the daemon hosts, by id, with its active generation and the ones still draining.
///
/// ```
///  lease(model) ──► model index ──► active generation ──► inflight += 1 ──► stream ──terminal──► inflight -= 1
///  reload(id)   ──► load/reuse library ──► create + describe (warm) ──► switch active ──► old one drains
/// ```
///
/// The request path (`lease`) takes one short lock; loading and reloading run off the cooperative pool on each
/// generation's control queue. Any reload failure keeps the active generation and records why.
public final class BackendRegistry: Sendable {
    /// What the registry loads and how it treats requests.
    public struct Configuration: Sendable {
        /// Where `<id>.json` manifests and their libraries are.
        public var backendDirectory: String
        /// Where generation-unique copies of libraries are written before `dlopen`.
        public var copyDirectory: String
        /// Parent of each backend's private state directory (`<stateDirectory>/<id>`).
        public var stateDirectory: String
        /// Settings per backend id, passed to `create` in the config document.
        public var settings: [String: [String: String]]
        /// Backend ids that are not loaded even though a manifest exists.
        public var disabled: Set<String>
        /// Watchdog limits for every generation.
        public var limits: GenerationLimits
        /// How long an old generation may keep serving its requests after a reload before they are cancelled.
        public var drainTimeout: Duration
        /// The `afm-backend-runner` executable; nil means next to the running executable.
        public var runnerPath: String?
        /// How crashed runners are restarted.
        public var restartPolicy: RestartPolicy
        /// Whether `auto` prefers the private cloud when it is available (the private-cloud preference).
        public var preferPrivateCloud = false
        /// A directory holding ``copyDirectory`` that others could replace (the `/tmp/afm-UID` runtime directory):
        /// verified with ``PrivateDirectory/prepare(_:owner:)`` before every generation writes its copy, so one that
        /// a tmp cleaner removed and another user re-created after the start fails the load instead.
        public var privateDirectory: String?

        public init(
            backendDirectory: String, copyDirectory: String, stateDirectory: String,
            settings: [String: [String: String]] = [:], disabled: Set<String> = [],
            limits: GenerationLimits = .init(), drainTimeout: Duration = .seconds(120),
            runnerPath: String? = nil, restartPolicy: RestartPolicy = .init()
        ) {
            self.runnerPath = runnerPath
            self.restartPolicy = restartPolicy
            self.backendDirectory = backendDirectory
            self.copyDirectory = copyDirectory
            self.stateDirectory = stateDirectory
            self.settings = settings
            self.disabled = disabled
            self.limits = limits
            self.drainTimeout = drainTimeout
        }
    }

    struct Slot {
        var manifestPath: String
        var manifest: BackendManifest?
        /// The library loaded into this process (in-process hosting).
        var library: BackendLibrary?
        /// The fingerprint of the library the active runner generation was started from (runner hosting).
        var runnerLibraryFingerprint: FileFingerprint?
        var active: BackendGeneration?
        var draining: [BackendGeneration] = []
        var lastError: BackendLoadError?
        var generationsBuilt: UInt64 = 0
        var reloading = false
        /// The reload in progress is building its generation (`drainAll` waits for that, within its deadline).
        var building = false
        /// The generation the reload in progress built and has not switched in yet: `drainAll` retires it too.
        var unswitched: BackendGeneration?
        /// Runner crashes and restarts.
        var crashes = CrashHistory()
        var restartTask: Task<Void, Never>?

        /// The library path and the fingerprint of what the active generation runs, to compare with the file
        /// (outside the registry's lock: that reads the whole file).
        var loadedLibrary: (path: String, fingerprint: FileFingerprint)? {
            guard let manifest, let fingerprint = library?.fingerprint ?? runnerLibraryFingerprint else { return nil }
            return (manifest.libraryPath, fingerprint)
        }
    }

    struct State {
        var configuration: Configuration
        /// The one weak reference to this registry that runner exit callbacks share (``weakReference``).
        var weakReference: WeakRegistry?
        var order: [String] = []
        var slots: [String: Slot] = [:]
        var modelIndex: [String: BackendGeneration] = [:]
        var shuttingDown = false
        /// Tests: runs after a generation was built and before it is switched in.
        var beforeSwitch: (@Sendable (BackendGeneration) async -> Void)?
    }

    private let state: Mutex<State>
    private let logger: Logger
    /// The cancel grace of `configuration.limits`, which every stream started here follows while it runs.
    private let cancelGrace: SharedCancelGrace

    public init(configuration: Configuration, logger: Logger) {
        self.state = Mutex(State(configuration: configuration))
        cancelGrace = SharedCancelGrace(configuration.limits.cancelGrace)
        self.logger = logger
    }

    /// A registry that goes away (tests; the daemon's lives until exit) ends its runners: nothing can reach them
    /// any more. In-process instances stay as they are, like their libraries.
    deinit {
        let runners = state.withLock { state in
            state.slots.values.flatMap { slot in (slot.active.map { [$0] } ?? []) + slot.draining }
                .compactMap { $0.host as? RunnerInstanceHost }
        }
        for runner in runners { runner.endWithoutDestroy() }
    }

    // MARK: - Loading

    /// Discovers the manifests in the backend directory and loads every enabled backend. Failures are recorded
    /// per backend (visible in `statuses()`), never thrown: one broken backend must not stop the others.
    public func loadAll() async {
        let configuration = state.withLock { $0.configuration }
        // A fresh start owns the copy directory: copies left by an earlier process are garbage.
        try? FileManager.default.removeItem(atPath: configuration.copyDirectory)
        let paths: [String]
        do {
            paths = try BackendManifest.manifestPaths(in: configuration.backendDirectory)
        } catch {
            logger.error("cannot scan backends", ["error": error.description])
            return
        }
        var ids: [String] = []
        for path in paths {
            let id: String
            do {
                id = try BackendManifest(contentsOf: path).id
            } catch {
                logger.error("skipping backend manifest", ["error": error.description])
                continue
            }
            let added = state.withLock { state -> Bool in
                guard state.slots[id] == nil else { return false }
                state.order.append(id)
                state.slots[id] = Slot(manifestPath: path)
                return true
            }
            guard added else {
                logger.error("duplicate backend id; keeping the first manifest", ["backend": id, "manifest": path])
                continue
            }
            if configuration.disabled.contains(id) {
                logger.info("backend disabled by configuration", ["backend": id])
                continue
            }
            ids.append(id)
        }
        for id in ids {
            do {
                _ = try await reload(id)
            } catch {
                logger.error("backend failed to load", ["backend": id, "error": error.description])
            }
        }
    }

    /// Builds, warms and switches to a new generation of one backend.
    ///
    /// A new library copy is loaded only when the `.so` changed on disk; otherwise a new instance is created in
    /// the library already loaded. On any failure the active generation stays active and the error is recorded.
    ///
    /// - Returns: the new generation number.
    /// - Throws: `BackendLoadError` saying why; the previous generation (if any) keeps serving.
    @discardableResult
    public func reload(_ id: String) async throws(BackendLoadError) -> UInt64 {
        try await reload(id, atSwitch: nil)
    }

    /// `reload(_:)`, running `atSwitch` on the slot in the same critical section that makes the new generation
    /// active, so status readers never see the new generation without the bookkeeping that goes with it.
    private func reload(_ id: String, atSwitch: (@Sendable (inout Slot) -> Void)?) async throws(BackendLoadError) -> UInt64 {
        let start = state.withLock { state -> Result<(Slot, Configuration, UInt64), BackendLoadError> in
            guard var slot = state.slots[id] else {
                return .failure(BackendLoadError(path: id, "no backend '\(id)' is installed", reason: "not_configured"))
            }
            // Shutdown (`drainAll`) began: a generation built now could only be retired again, and its build (a model
            // load) would run on while the daemon exits.
            guard !state.shuttingDown else {
                return .failure(BackendLoadError(path: slot.manifestPath, "afmd is shutting down", reason: "shutting_down"))
            }
            guard !slot.reloading else {
                return .failure(BackendLoadError(path: slot.manifestPath, "a reload of '\(id)' is already in progress", reason: "busy"))
            }
            slot.reloading = true
            slot.building = true
            slot.generationsBuilt += 1
            state.slots[id] = slot
            return .success((slot, state.configuration, slot.generationsBuilt))
        }
        let (slot, configuration, number) = try start.get()

        let outcome = await build(id: id, slot: slot, configuration: configuration, number: number)
        state.withLock { state in
            state.slots[id]?.building = false
            // Visible to `drainAll` from here until the switch, so a shutdown meanwhile retires it and waits for that.
            if case .success(let built) = outcome { state.slots[id]?.unswitched = built.generation }
        }
        switch outcome {
        case .failure(let error):
            state.withLock { state in
                state.slots[id]?.reloading = false
                state.slots[id]?.lastError = error
            }
            logger.error(
                "reload failed; the previous generation keeps serving",
                ["backend": id, "generation": String(number), "error": error.description])
            throw error
        case .success(let built):
            let generation = built.generation
            if let hook = state.withLock({ $0.beforeSwitch }) { await hook(generation) }
            enum Switch {
                case switched(old: BackendGeneration?)
                case shuttingDown
                case runnerDied
            }
            let outcome = state.withLock { state -> Switch in
                state.slots[id]?.unswitched = nil
                // Shutdown (`drainAll`) took every generation out of service: this one must not start serving.
                guard !state.shuttingDown else {
                    state.slots[id]?.reloading = false
                    return .shuttingDown
                }
                // A runner that died after it was built and before this switch was not found by `runnerExited`
                // (neither active nor draining): it must not become active, or every request would fail with
                // `backend_crashed` and no restart would follow. A death after this point finds it active.
                guard generation.runnerHost?.isAlive ?? true else {
                    state.slots[id]?.reloading = false
                    return .runnerDied
                }
                var slot = state.slots[id]!  // Safety: slots are never removed.
                let old = slot.active
                slot.manifest = built.manifest
                slot.library = built.library
                slot.runnerLibraryFingerprint = built.runnerLibraryFingerprint
                slot.active = generation
                slot.lastError = nil
                slot.reloading = false
                if let old, old.snapshot.phase != .crashed { slot.draining.append(old) }
                slot.draining.removeAll { $0.snapshot.phase == .crashed || $0.hasFinishedRetiring }
                atSwitch?(&slot)
                state.slots[id] = slot
                state.rebuildModelIndex(logger: logger)
                return .switched(old: old)
            }
            let old: BackendGeneration?
            switch outcome {
            case .switched(let previous):
                old = previous
            case .shuttingDown:
                // Nothing ever ran on it: it retires at once (unless `drainAll` retired it already), and its destroy
                // is done before this returns.
                generation.beginDrain(deadline: .zero)
                await generation.waitForControlQueue()
                throw BackendLoadError(path: id, "afmd is shutting down", reason: "shutting_down")
            case .runnerDied:
                generation.markCrashed()
                let error = BackendLoadError(
                    path: id, "the backend runner of generation \(number) died before it took traffic", reason: "runner_failed")
                state.withLock { $0.slots[id]?.lastError = error }
                logger.error(
                    "reload failed; the previous generation keeps serving",
                    ["backend": id, "generation": String(number), "error": error.description])
                throw error
            }
            // Forgotten when its drain ends (it was kept, with its runner host, until the next switch).
            old?.setOnRetired { [weak self] in self?.forgetRetired(backend: id) }
            old?.beginDrain(deadline: configuration.drainTimeout)
            logger.info(
                "backend generation active",
                [
                    "backend": id, "generation": String(number), "version": generation.description.version,
                    "models": generation.description.models.map(\.id).joined(separator: ","),
                ])
            return number
        }
    }

    /// Drops the crashed generations of a backend and those whose retire finished from its draining list (one
    /// whose destroy is still queued stays listed, so `drainAll` waits for it).
    private func forgetRetired(backend id: String) {
        state.withLock { $0.slots[id]?.draining.removeAll { $0.snapshot.phase == .crashed || $0.hasFinishedRetiring } }
    }

    /// The numbers of the generations of a backend still listed as draining (tests).
    func drainingGenerations(_ id: String) -> [UInt64] {
        state.withLock { $0.slots[id]?.draining.map(\.number) ?? [] }
    }

    /// What `build` made.
    struct Built: Sendable {
        var manifest: BackendManifest
        var library: BackendLibrary?
        var runnerLibraryFingerprint: FileFingerprint?
        var generation: BackendGeneration
    }

    private func build(
        id: String, slot: Slot, configuration: Configuration, number: UInt64
    ) async -> Result<Built, BackendLoadError> {
        do throws(BackendLoadError) {
            let manifest = try BackendManifest(contentsOf: slot.manifestPath)
            guard manifest.id == id else {
                throw BackendLoadError(path: slot.manifestPath, "manifest id changed from '\(id)' to '\(manifest.id)'")
            }
            let settings = configuration.settings[id] ?? [:]
            let hosting = try Self.hosting(of: manifest, settings: settings)
            if let directory = configuration.privateDirectory {
                do {
                    try PrivateDirectory.prepare(directory)
                } catch {
                    throw BackendLoadError(path: configuration.copyDirectory, error.description, reason: "untrusted_directory")
                }
            }
            let document = Self.configDocument(id: id, number: number, configuration: configuration)
            let logger = self.logger.with("backend", id)
            switch hosting {
            case .inProcess:
                let library: BackendLibrary
                // Keep the loaded library when the file still has its bytes (a settings-only reload); a new load
                // reads the file itself, so only compare when there is something to compare with.
                let unchanged: BackendLibrary?
                if let loaded = slot.library {
                    let current = try await runOffPool { () throws(BackendLoadError) in FileFingerprint(contentsOf: manifest.libraryPath) }
                    unchanged = current == loaded.fingerprint ? loaded : nil
                } else {
                    unchanged = nil
                }
                if let unchanged {
                    library = unchanged
                } else {
                    // dlopen and negotiation may take a while (relocations, constructors): keep them off the pool.
                    let logger = self.logger
                    library = try await runOffPool { () throws(BackendLoadError) -> BackendLibrary in
                        try BackendLibrary(
                            manifest: manifest, copyDirectory: configuration.copyDirectory, uniqueName: "\(id)-g\(number)",
                            logger: logger)
                    }
                }
                let generation = try await BackendGeneration.make(
                    backendID: id, number: number, configDocument: document, settings: settings, logger: logger
                ) { () throws(BackendLoadError) -> any BackendInstanceHost in
                    InProcessInstanceHost(instance: try BackendInstance.create(library: library, configDocument: document))
                }
                return .success(Built(manifest: manifest, library: library, generation: generation))
            case .runner:
                let limits = try RunnerLimits(settings: settings, backend: id)
                let fingerprint = try await runOffPool { () throws(BackendLoadError) in FileFingerprint(contentsOf: manifest.libraryPath) }
                let runnerPath = configuration.runnerPath ?? RunnerInstanceHost.defaultRunnerPath()
                let generation = try await BackendGeneration.make(
                    backendID: id, number: number, configDocument: document, settings: settings, logger: logger
                ) { [reference = weakReference] () throws(BackendLoadError) -> any BackendInstanceHost in
                    try RunnerInstanceHost.launch(
                        manifest: manifest, runnerPath: runnerPath, limits: limits, copyDirectory: configuration.copyDirectory,
                        uniqueName: "\(id)-g\(number)", configDocument: document, logger: logger
                    ) { exit in
                        reference.registry?.runnerExited(backend: id, generation: number, exit: exit)
                    }
                }
                return .success(Built(manifest: manifest, runnerLibraryFingerprint: fingerprint, generation: generation))
            }
        } catch {
            return .failure(error)
        }
    }

    /// The hosting of a backend: its `Hosting` setting when present, else its manifest's.
    static func hosting(of manifest: BackendManifest, settings: [String: String]) throws(BackendLoadError) -> BackendManifest.Hosting {
        guard let value = settings["Hosting"], !value.isEmpty else { return manifest.hosting }
        guard let hosting = BackendManifest.Hosting(rawValue: value) else {
            throw BackendLoadError(
                path: "[Backend.\(manifest.id)]", "Hosting=\(value) must be \"in-process\" or \"runner\"", reason: "invalid_setting")
        }
        return hosting
    }

    static func configDocument(id: String, number: UInt64, configuration: Configuration) -> [UInt8] {
        var settings = JSONObject()
        for (key, value) in (configuration.settings[id] ?? [:]).sorted(by: { $0.key < $1.key })
        where !RunnerLimits.settingKeys.contains(key) {
            settings[key] = .string(value)
        }
        let document: JSONValue = [
            "config_version": 1,
            "backend": .string(id),
            "instance": .string("\(id)#\(number)"),
            "generation": .number(JSONNumber(Int(number))),
            "state_dir": .string((configuration.stateDirectory as NSString).appendingPathComponent(id)),
            "settings": .object(settings),
        ]
        return document.encoded()
    }

    /// What `reloadChanged()` did for one backend.
    public enum ReloadOutcome: Sendable {
        case unchanged(generation: UInt64?)
        case reloaded(generation: UInt64)
        case failed(BackendLoadError, activeGeneration: UInt64?)
    }

    /// Reloads every backend whose configuration, model file or library changed, and loads backends that were
    /// installed since (new manifests). Unchanged backends keep their generation.
    public func reloadChanged() async -> [(backend: String, outcome: ReloadOutcome)] {
        let configuration = state.withLock { $0.configuration }
        // Newly installed manifests.
        if let paths = try? BackendManifest.manifestPaths(in: configuration.backendDirectory) {
            for path in paths {
                guard let id = try? BackendManifest(contentsOf: path).id else { continue }
                state.withLock { state in
                    guard state.slots[id] == nil else { return }
                    state.order.append(id)
                    state.slots[id] = Slot(manifestPath: path)
                }
            }
        }
        let candidates = state.withLock { state in
            state.order.compactMap { id -> (String, Bool, UInt64?, (path: String, fingerprint: FileFingerprint)?)? in
                guard let slot = state.slots[id], !state.configuration.disabled.contains(id) else { return nil }
                let settings = state.configuration.settings[id] ?? [:]
                let changed = slot.active.map { $0.isOutdated(comparedWith: settings) } ?? true
                return (id, changed, slot.active?.number, slot.loadedLibrary)
            }
        }
        var outcomes: [(String, ReloadOutcome)] = []
        for (id, settingsChanged, active, loaded) in candidates {
            var changed = settingsChanged
            if !changed, let loaded {
                let current = try? await runOffPool { () throws(BackendLoadError) in FileFingerprint(contentsOf: loaded.path) }
                changed = current != loaded.fingerprint
            }
            guard changed else {
                outcomes.append((id, .unchanged(generation: active)))
                continue
            }
            do {
                outcomes.append((id, .reloaded(generation: try await reload(id))))
            } catch {
                outcomes.append((id, .failed(error, activeGeneration: active)))
            }
        }
        return outcomes
    }

    /// Tests: `hook` runs after each generation was built and before it is switched in (to interleave a runner
    /// death or a shutdown there).
    func setBeforeSwitchHook(_ hook: (@Sendable (BackendGeneration) async -> Void)?) {
        state.withLock { $0.beforeSwitch = hook }
    }

    /// Replaces the settings used by later reloads (the running generations are unaffected), and the limits of later
    /// requests; the cancel grace applies to the streams already running too (``SharedCancelGrace``).
    public func updateConfiguration(_ update: @Sendable (inout Configuration) -> Void) {
        // Set under the lock: two updates racing must leave the running streams' grace the configuration's, not
        // the one read by the update that got the lock first.
        state.withLock { state in
            update(&state.configuration)
            cancelGrace.set(state.configuration.limits.cancelGrace)
        }
    }

    // MARK: - Requests

    /// Leases the active generation serving `model`.
    ///
    /// - Throws: `AFMError` 404 `model_not_found` for an unknown id, 503 `model_unavailable` when its backend
    ///   says it is unavailable.
    public func lease(model requested: String) throws(AFMError) -> BackendLease {
        let model = try resolve(requested)
        for _ in 0..<8 {
            let (generation, limits) = state.withLock { ($0.modelIndex[model], $0.configuration.limits) }
            guard let generation else {
                throw AFMError(
                    .invalidRequest, "The model '\(model)' does not exist or is not served by any loaded backend.",
                    param: "model", publicCode: "model_not_found", httpStatus: 404)
            }
            if generation.snapshot.phase == .crashed {
                let retry = state.withLock { $0.slots[generation.backendID]?.crashes.secondsUntilRestart() } ?? 1
                throw AFMError(
                    .backendCrashed, "The backend '\(generation.backendID)' serving '\(model)' crashed and is restarting; retry.",
                    retryAfterSeconds: max(1, retry))
            }
            guard generation.description.available else {
                let reason = generation.description.reason ?? "the backend reports it is unavailable"
                throw AFMError(.modelUnavailable, "The model '\(model)' is unavailable: \(reason)", param: "model")
            }
            // Safety of the retry: a reload may switch the index between the lookup and the acquire; a draining
            // generation refuses, and the next lookup finds its successor.
            guard generation.acquire() else { continue }
            if let described = generation.description.models.first(where: { $0.id == model }) {
                return BackendLease(generation: generation, model: described, limits: limits, cancelGrace: cancelGrace)
            }
            // Its latest describe no longer lists the model (the index is rebuilt after a refresh): give the lease
            // back, or the generation would count a request that never ends and could never retire.
            generation.release(completed: false)
            if state.withLock({ $0.modelIndex[model] }) === generation {
                throw AFMError(
                    .invalidRequest, "The model '\(model)' does not exist or is not served by any loaded backend.",
                    param: "model", publicCode: "model_not_found", httpStatus: 404)
            }
        }
        throw AFMError(.busy, "The backend for '\(model)' is switching generations; retry.", retryAfterSeconds: 1)
    }

    /// Describes every active generation again, so availability, quota and upstream health that changed while
    /// it ran reach routing and `/status`. Describe is cheap by contract.
    public func refreshDescriptions() async {
        let generations = state.withLock { state in state.order.compactMap { state.slots[$0]?.active } }
        for generation in generations { await generation.refreshDescription() }
        state.withLock { $0.rebuildModelIndex(logger: logger) }
    }

    // MARK: - Routing

    /// The backend id of the on-device class (the local model).
    public static let onDeviceBackend = "local"
    /// The backend id of the private cloud.
    public static let privateCloudBackend = "private-cloud"
    /// Model ids that name a class of model instead of a model.
    public static let aliases = ["auto", "on-device", "private-cloud"]

    /// Resolves the aliases to a concrete model id; other ids pass through.
    ///
    /// - `on-device`: the local backend's model (without a local backend, the first available model of another
    ///   non-cloud backend, so a scripted demo answers too).
    /// - `private-cloud`: the private cloud's model; 503 `model_unavailable` with its reason when it is not
    ///   configured or not available.
    /// - `auto`: the private cloud when it is preferred, available and has daily quota left (its describe
    ///   document's `quota.exhausted`), else on-device. An explicit `private-cloud` still reaches it and gets
    ///   429 `quota_exceeded` with the reset time.
    public func resolve(_ model: String) throws(AFMError) -> String {
        guard Self.aliases.contains(model) else { return model }
        let (onDevice, cloud, preferCloud, cloudUsedUp) = state.withLock { state -> (String?, (String?, String?), Bool, Bool) in
            func available(_ id: String) -> BackendGeneration? {
                guard let generation = state.slots[id]?.active, generation.description.available else { return nil }
                return generation
            }
            var local = available(Self.onDeviceBackend)?.description.models.first?.id
            for id in state.order where local == nil && id != Self.privateCloudBackend {
                local = available(id)?.description.models.first?.id
            }
            let cloudSlot = state.slots[Self.privateCloudBackend]
            let cloudGeneration = available(Self.privateCloudBackend)
            let cloudModel = cloudGeneration?.description.models.first?.id
            let cloudReason = cloudSlot == nil
                ? "private cloud is not configured"
                : cloudSlot?.active?.description.reason ?? cloudSlot?.lastError?.message ?? "private cloud is not available"
            let usedUp = cloudGeneration?.description.details["quota"]?["exhausted"]?.boolValue == true
            return (local, (cloudModel, cloudReason), state.configuration.preferPrivateCloud, usedUp)
        }
        switch model {
        case "private-cloud":
            guard let id = cloud.0 else {
                throw AFMError(.modelUnavailable, "The private cloud is unavailable: \(cloud.1 ?? "unknown reason").", param: "model", retryAfterSeconds: 30)
            }
            return id
        case "auto" where preferCloud && cloud.0 != nil && !cloudUsedUp:
            return cloud.0!  // Safety: checked non-nil in the pattern.
        default:
            guard let id = onDevice else {
                throw AFMError(.modelUnavailable, "No on-device model is available.", param: "model", retryAfterSeconds: 5)
            }
            return id
        }
    }

    /// Whether an alias can be served right now (for `/v1/models`).
    public func aliasIsUsable(_ alias: String) -> Bool {
        (try? resolve(alias)) != nil
    }

    // MARK: - Status

    /// The status of every discovered backend, in discovery order.
    public func statuses() -> [BackendStatus] {
        state.withLock { state in
            state.order.compactMap { id -> BackendStatus? in
                guard let slot = state.slots[id] else { return nil }
                let disabled = state.configuration.disabled.contains(id)
                return BackendStatus(
                    id: id, slot: slot, disabled: disabled, crashLoopThreshold: state.configuration.restartPolicy.crashLoopThreshold)
            }
        }
    }

    /// Every model served by an active generation, in backend order (unavailable ones included, flagged).
    public func models() -> [(model: BackendDescription.Model, backend: String, available: Bool)] {
        state.withLock { state in
            var seen = Set<String>()
            var result: [(BackendDescription.Model, String, Bool)] = []
            for id in state.order {
                guard let generation = state.slots[id]?.active else { continue }
                for model in generation.description.models where seen.insert(model.id).inserted {
                    result.append((model, id, generation.description.available))
                }
            }
            return result
        }
    }

    /// Stops routing to every generation and waits up to `deadline` for their requests to end; the rest are
    /// cancelled. Used by graceful shutdown.
    public func drainAll(deadline: Duration) async {
        let generations = state.withLock { state -> [BackendGeneration] in
            state.shuttingDown = true
            // A generation a reload built and has not switched in yet never will be (the switch checks
            // `shuttingDown`): it retires here, so its destroy is done when this returns.
            let all = state.slots.values.flatMap { slot in
                (slot.active.map { [$0] } ?? []) + slot.draining + (slot.unswitched.map { [$0] } ?? [])
            }
            for id in state.order {
                state.slots[id]?.active = nil
                state.slots[id]?.restartTask?.cancel()
                state.slots[id]?.restartTask = nil
            }
            state.modelIndex = [:]
            return all
        }
        for generation in generations { generation.beginDrain(deadline: deadline) }
        let clock = ContinuousClock()
        let end = clock.now + deadline + .seconds(1)
        // Reloads still building (refused from now on when they start) finish within the same deadline if they can.
        func busy() -> Bool {
            generations.contains(where: { ![.retired, .crashed].contains($0.snapshot.phase) })
                || state.withLock { $0.slots.values.contains { $0.building } }
        }
        while clock.now < end, busy() {
            try? await Task.sleep(for: .milliseconds(20))
        }
        // Past the deadline: what still runs a request retires now without destroy (queued on its control queue,
        // so waited for below), instead of being destroyed when that request ends, after this returned.
        for generation in generations { generation.retireAtShutdownWithoutDestroy() }
        // What those reloads built, not yet switched in (their switch refuses it): retired here, waited for below.
        let late = state.withLock { state in
            state.slots.values.compactMap(\.unswitched).filter { built in !generations.contains { $0 === built } }
        }
        for generation in late { generation.beginDrain(deadline: .zero) }
        for generation in generations + late { await generation.waitForControlQueue() }
    }
}

extension BackendRegistry {
    // MARK: - Crashes and restarts

    /// A runner ended. An expected exit (a retired generation) needs nothing; a crash of the active generation
    /// takes it out of service (its streams already failed with `backend_crashed`) and schedules a restart with
    /// exponential backoff.
    func runnerExited(backend id: String, generation number: UInt64, exit: RunnerExit) {
        guard !exit.expected else { return }
        let now = ContinuousClock.now
        let decision = state.withLock { state -> (delay: Duration, crashLoop: Bool, crashes: Int)? in
            guard !state.shuttingDown, var slot = state.slots[id] else { return nil }
            let policy = state.configuration.restartPolicy
            let isActive = slot.active?.number == number
            let generation = isActive ? slot.active : slot.draining.first { $0.number == number }
            guard let generation, generation.markCrashed() else { return nil }
            slot.draining.removeAll { $0.number == number }
            let stableFor = now - generation.createdAt
            slot.crashes.record(exit: exit, at: now, stableFor: stableFor, policy: policy)
            var delay: Duration?
            if isActive {
                delay = slot.crashes.scheduleRestart(now: now, policy: policy)
            }
            state.slots[id] = slot
            guard let delay else { return nil }
            return (delay, slot.crashes.recentCount(now: now, policy: policy) >= policy.crashLoopThreshold, slot.crashes.total)
        }
        guard let decision else {
            logger.error("backend runner crashed", ["backend": id, "generation": String(number), "status": exit.summary])
            return
        }
        logger.error(
            decision.crashLoop ? "backend is in a crash loop; restarting with backoff" : "backend crashed; restarting",
            [
                "backend": id, "generation": String(number), "status": exit.summary,
                "restart_in_ms": String(decision.delay.components.seconds * 1000 + decision.delay.components.attoseconds / 1_000_000_000_000_000),
                "crashes": String(decision.crashes),
            ])
        scheduleRestart(id, after: decision.delay)
    }

    private func scheduleRestart(_ id: String, after delay: Duration) {
        let task = Task { [weak self] in
            try? await Task.sleep(for: delay)
            guard !Task.isCancelled else { return }
            await self?.restart(id)
        }
        state.withLock { state in
            state.slots[id]?.restartTask?.cancel()
            state.slots[id]?.restartTask = task
        }
    }

    private func restart(_ id: String) async {
        guard state.withLock({ !$0.shuttingDown && $0.slots[id]?.active?.snapshot.phase == .crashed }) else { return }
        do {
            let number = try await reload(id) { $0.crashes.restarted() }
            logger.info("backend restarted after a crash", ["backend": id, "generation": String(number)])
        } catch {
            let delay = state.withLock { state -> Duration? in
                guard !state.shuttingDown, var slot = state.slots[id] else { return nil }
                let delay = slot.crashes.scheduleRestart(now: .now, policy: state.configuration.restartPolicy)
                state.slots[id] = slot
                return delay
            }
            logger.error("restart after a crash failed", ["backend": id, "error": error.description])
            if let delay { scheduleRestart(id, after: delay) }
        }
    }
}

extension BackendRegistry.State {
    mutating func rebuildModelIndex(logger: Logger) {
        var index: [String: BackendGeneration] = [:]
        for id in order {
            guard let generation = slots[id]?.active else { continue }
            for model in generation.description.models {
                if let existing = index[model.id] {
                    if existing.backendID != id {
                        logger.warning(
                            "model id served by two backends; the first wins",
                            ["model": model.id, "kept": existing.backendID, "ignored": id])
                    }
                    continue
                }
                index[model.id] = generation
            }
        }
        modelIndex = index
    }
}

extension BackendRegistry {
    /// A weak reference to this registry, made once and kept by it for its lifetime. Why one, kept: a weak
    /// reference gives the registry a side table whose address Swift stores only inside the object's reference
    /// count, where LeakSanitizer cannot read it; with a box per runner, the table looked leaked (afmd's exit under
    /// `make test-asan`) once the last box was gone and the registry still lived. The kept box references it.
    fileprivate var weakReference: WeakRegistry {
        state.withLock { state in
            if let reference = state.weakReference { return reference }
            let reference = WeakRegistry(self)
            state.weakReference = reference
            return reference
        }
    }
}

/// A weak reference to a registry, for runner exit callbacks (a runner must not keep its registry alive).
final class WeakRegistry: Sendable {
    weak let registry: BackendRegistry?
    init(_ registry: BackendRegistry) { self.registry = registry }
}

/// Runs blocking work on a Dispatch thread instead of the cooperative pool.
func runOffPool<T: Sendable>(_ work: @escaping @Sendable () throws(BackendLoadError) -> T) async throws(BackendLoadError) -> T {
    let result: Result<T, BackendLoadError> = await withCheckedContinuation { continuation in
        DispatchQueue.global().async {
            do throws(BackendLoadError) {
                continuation.resume(returning: .success(try work()))
            } catch {
                continuation.resume(returning: .failure(error))
            }
        }
    }
    return try result.get()
}
