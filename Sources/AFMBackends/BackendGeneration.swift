// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMLogging
import AFMSystem
import Dispatch
import Foundation
import Synchronization

/// One configured, warmed instance of a backend: the unit of hot reload.
///
/// A generation is `active` while new requests are routed to it, `draining` after a reload switched traffic
/// to its successor, and `retired` once its last request ended and its instance was destroyed. Requests hold a
/// lease on the generation they started on until their terminal event, so in-flight streams never migrate.
///
/// `create`, `describe` and `destroy` run on the generation's own serial control queue (the ABI's
/// [control-thread]); they may block for a long time (model loading) and must never run on the cooperative pool.
public final class BackendGeneration: Sendable {
    /// Lifecycle phase of a generation.
    public enum Phase: String, Sendable {
        case active
        case draining
        case retired
        /// The runner hosting the instance died; a restart replaces the generation.
        case crashed
    }

    /// The backend id.
    public let backendID: String
    /// Generation number, increasing per backend from 1.
    public let number: UInt64
    /// What the instance serves, as its latest describe document says (refreshed periodically: availability,
    /// quota and upstream health change while it runs).
    public var description: BackendDescription { described.withLock { $0 } }
    private let described: Mutex<BackendDescription>
    /// The config document the instance was created with.
    public let configDocument: [UInt8]
    /// The settings the instance was created with, and the files they name as they were then (a model swapped
    /// in place at the same path is a change too).
    public let settings: [String: String]
    let fileStamps: [String: FileStamp]
    /// When the instance was created (for the restart policy: a runner that ran long enough before crashing was stable).
    let createdAt = ContinuousClock.now

    /// Where the instance runs: in this process, or in a runner process.
    let host: any BackendInstanceHost
    /// `host` when it is a runner (it takes flow-control credit), found once: a dynamic cast per request showed in
    /// the request path's profile.
    let runnerHost: RunnerInstanceHost?
    private let controlQueue: DispatchQueue
    private let logger: Logger
    private let state = Mutex(State())

    struct State {
        var phase: Phase = .active
        var inflight = 0
        var streams: [UInt64: GenerationStream] = [:]
        /// A stream was cut off while its backend may still run it: destroying the instance could free memory
        /// that backend thread still uses, so such a generation is leaked instead of destroyed.
        var hasAbandonedStreams = false
        var completed: UInt64 = 0
        /// A drain deadline passed and cancelled the streams then registered: a stream registered later (a lease
        /// taken before the drain, started after its deadline) is cancelled as it starts.
        var drainDeadlinePassed = false
        /// The retire (the instance's destroy, or its runner's shutdown) ran on the control queue.
        var retireFinished = false
        /// Called once when the retire finished (``setOnRetired(_:)``).
        var onRetired: (@Sendable () -> Void)?
    }

    private init(
        backendID: String, number: UInt64, description: BackendDescription, configDocument: [UInt8],
        settings: [String: String], host: any BackendInstanceHost, controlQueue: DispatchQueue, logger: Logger
    ) {
        self.settings = settings
        self.fileStamps = FileStamp.stamps(ofFilesIn: settings)
        self.backendID = backendID
        self.number = number
        self.described = Mutex(description)
        self.configDocument = configDocument
        self.host = host
        self.runnerHost = host as? RunnerInstanceHost
        self.controlQueue = controlQueue
        self.logger = logger
    }

    /// How the instance is hosted.
    public var hosting: BackendManifest.Hosting { host.hosting }

    /// The runner's process id, when the instance runs in a runner.
    public var processID: Int32? { host.processID }

    /// Creates (with `launch`) and describes a new instance on a fresh control queue.
    ///
    /// - Parameter launch: creates the instance and returns its host; runs on the control queue and may block
    ///   (model loading, starting a runner).
    /// - Throws: `BackendLoadError` with reason `create_failed`, `describe_failed` or a runner failure.
    static func make(
        backendID: String, number: UInt64, configDocument: [UInt8], settings: [String: String], logger: Logger,
        launch: @escaping @Sendable () throws(BackendLoadError) -> any BackendInstanceHost
    ) async throws(BackendLoadError) -> BackendGeneration {
        let queue = DispatchQueue(label: "afm.backend.\(backendID).g\(number)")
        let result: Result<BackendGeneration, BackendLoadError> = await withCheckedContinuation { continuation in
            queue.async {
                do throws(BackendLoadError) {
                    let host = try launch()
                    let description: BackendDescription
                    do throws(BackendLoadError) {
                        description = try host.describe()
                    } catch {
                        host.retire(abandoned: false)
                        throw error
                    }
                    let generation = BackendGeneration(
                        backendID: backendID, number: number, description: description, configDocument: configDocument,
                        settings: settings, host: host, controlQueue: queue, logger: logger.with("generation", String(number)))
                    Sanitizer.handOff(through: queue)
                    continuation.resume(returning: .success(generation))
                } catch {
                    Sanitizer.handOff(through: queue)
                    continuation.resume(returning: .failure(error))
                }
            }
        }
        // A quick create and describe (the in-process fixture) can resume before this task awaits; then the
        // concurrency runtime does not tell ThreadSanitizer of the handoff, and the registry's first read of the
        // generation's fields was reported as a race with their initialization here (Sanitizer.handOff).
        Sanitizer.receive(through: queue)
        return try result.get()
    }

    /// Whether a generation built now from `settings` would differ from this one: other settings, or a file
    /// they name changed on disk.
    func isOutdated(comparedWith settings: [String: String]) -> Bool {
        settings != self.settings || FileStamp.stamps(ofFilesIn: settings) != fileStamps
    }

    /// Asks the backend to describe itself again (on the control queue) and keeps the new document. A failing
    /// describe keeps the previous document and returns false.
    @discardableResult
    func refreshDescription() async -> Bool {
        let host = self.host
        let result: BackendDescription? = await withCheckedContinuation { continuation in
            controlQueue.async { [self] in
                guard snapshot.phase == .active || snapshot.phase == .draining else {
                    continuation.resume(returning: nil)
                    return
                }
                continuation.resume(returning: try? host.describe())
            }
        }
        guard let fresh = result else { return false }
        described.withLock { $0 = fresh }
        return true
    }

    // MARK: - Leases

    /// Takes a lease if the generation is active. Returns false once it is draining.
    func acquire() -> Bool {
        state.withLock { state in
            guard state.phase == .active else { return false }
            state.inflight += 1
            return true
        }
    }

    /// Gives a lease back. `completed`: a request ran on it (false for a lease taken and given back unused).
    func release(completed: Bool = true) {
        let retire = state.withLock { state -> Bool in
            state.inflight -= 1
            if completed { state.completed += 1 }
            return state.phase == .draining && state.inflight == 0
        }
        if retire { retireNow() }
    }

    /// Current phase and number of requests in flight.
    public var snapshot: (phase: Phase, inflight: Int, completed: UInt64) {
        state.withLock { ($0.phase, $0.inflight, $0.completed) }
    }

    // MARK: - Generating

    /// Starts a generation. The stream's end releases `lease`: its terminal event once no call into the backend for
    /// it is in flight (`GenerationStream`), so the instance outlives every `generate` and `cancel` made on it.
    func start(
        requestDocument: [UInt8], lease: BackendLease, limits: GenerationLimits, cancelGrace: SharedCancelGrace
    ) throws(AFMError) -> GenerationStream {
        let table = GenerationTable.shared
        let id = table.makeID()
        let host = self.host
        let credit: (@Sendable (Int) -> Void)? =
            if let runner = runnerHost { { count in runner.grantCredit(requestID: id, events: count) } } else { nil }
        let stream = GenerationStream(
            id: id,
            capacity: RunnerInstanceHost.creditWindow,
            silenceLimit: limits.silenceLimit,
            sharedCancelGrace: cancelGrace,
            onCancel: {
                host.cancel(requestID: id)
            },
            onTerminal: { [weak self] expired in
                table.remove(id)
                if expired { self?.state.withLock { $0.hasAbandonedStreams = true } }
                host.generationEnded(requestID: id, expired: expired)
                self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
                lease.release()
            },
            onConsumed: credit)
        table.register(stream)
        Watchdog.shared.ensureRunning()
        // Registered in the same critical section the drain deadline takes its list of streams in: the deadline
        // either finds this stream or this stream finds the deadline passed.
        let lateForDrain = state.withLock { state -> Bool in
            state.streams[id] = stream
            return state.drainDeadlinePassed
        }
        // Held back until `generate` returned (`armCancel`), like any cancel during `generate`.
        if lateForDrain { stream.cancel() }
        do {
            try host.generate(requestID: id, document: requestDocument, stream: stream)
        } catch {
            // Refused synchronously: no event will come (ABI rule), so undo the registration here.
            table.remove(id)
            state.withLock { _ = $0.streams.removeValue(forKey: id) }
            lease.release()
            throw error
        }
        stream.armCancel()
        return stream
    }

    /// Counts input tokens with the backend's `afm.tokenize/1` extension, or nil when it has none.
    ///
    /// - Throws: `busy` when a runner's tokenizer pool is full.
    func countInputTokens(requestDocument: [UInt8]) throws(AFMError) -> Int? {
        try host.countInputTokens(document: requestDocument)
    }

    // MARK: - Draining and retiring

    /// Stops routing to this generation; it retires when its last request ends, or at `deadline` its remaining
    /// requests are cancelled. On a generation already draining it schedules that cancel again at `deadline`
    /// (shutdown's, usually earlier than the reload's).
    func beginDrain(deadline: Duration) {
        enum Start {
            case over
            case idle
            case busy
            case alreadyDraining
        }
        let start = state.withLock { state -> Start in
            switch state.phase {
            // A crashed or retired generation has nothing to drain: its streams already ended.
            case .crashed, .retired: return .over
            // Draining already (a reload replaced it, and now shutdown drains everything): its deadline may only
            // come earlier, so the new one is scheduled too (a later one finds nothing left, or cancels again:
            // harmless).
            case .draining: return .alreadyDraining
            case .active:
                state.phase = .draining
                return state.inflight == 0 ? .idle : .busy
            }
        }
        switch start {
        case .over:
            return
        case .idle:
            retireNow()
            return
        case .busy:
            logger.info("draining", ["deadline_ms": String(SystemClock.nanoseconds(deadline) / 1_000_000)])
        case .alreadyDraining:
            logger.info("draining with a new deadline", ["deadline_ms": String(SystemClock.nanoseconds(deadline) / 1_000_000)])
        }
        // The whole deadline, fractions of a second included (500 ms must not become an immediate cancel).
        let nanoseconds = Int(clamping: SystemClock.nanoseconds(deadline))
        // Weak: a generation whose last request ended retired and is of no use; holding it until the deadline (the
        // drain timeout, 120 s by default) kept it, its runner host and its documents alive that long after every
        // reload that replaced it mid-request. While a stream is left its lease holds the generation, so a nil
        // here means there is nothing to cancel.
        controlQueue.asyncAfter(deadline: .now() + .nanoseconds(nanoseconds)) { [weak self] in
            guard let self else { return }
            let remaining = state.withLock { state in
                state.drainDeadlinePassed = true
                return Array(state.streams.values)
            }
            if !remaining.isEmpty {
                logger.warning("drain deadline passed; cancelling remaining requests", ["requests": String(remaining.count)])
            }
            for stream in remaining { stream.cancel() }
        }
    }

    /// Runs `hook` once when this generation's retire finished (at once when it already has): the registry then
    /// forgets it, so a retired generation (its runner host, its documents) is not kept until the next switch.
    /// Not before: `BackendRegistry.drainAll` waits for the control queues of the generations it lists, and one
    /// forgotten while its destroy was still queued would be torn down by the process exit in the middle of it.
    func setOnRetired(_ hook: @escaping @Sendable () -> Void) {
        let finished = state.withLock { state -> Bool in
            guard !state.retireFinished else { return true }
            state.onRetired = hook
            return false
        }
        if finished { hook() }
    }

    /// Shutdown gave up waiting for this generation's requests (`BackendRegistry.drainAll`, past its deadline):
    /// it retires now, as one whose stream was cut off, so leaked rather than destroyed (a request may still be
    /// inside the backend). Otherwise its destroy would start when that request ended, after `drainAll` returned,
    /// while the process exits. Nothing when it retired or crashed already.
    func retireAtShutdownWithoutDestroy() {
        state.withLock { $0.hasAbandonedStreams = true }
        retireNow()
    }

    /// Whether the retire ran to its end on the control queue (a generation may be forgotten from then on).
    var hasFinishedRetiring: Bool { state.withLock { $0.retireFinished } }

    private func retireNow() {
        let abandonedStreams = state.withLock { state -> Bool? in
            guard state.phase != .retired, state.phase != .crashed else { return nil }
            state.phase = .retired
            return state.hasAbandonedStreams
        }
        guard let abandoned = abandonedStreams else { return }
        if abandoned {
            logger.warning("retired without destroy: a request was cut off while the backend may still run it")
        }
        let host = self.host
        let logger = self.logger
        controlQueue.async { [self] in
            host.retire(abandoned: abandoned)
            logger.info("retired")
            let onRetired = state.withLock { state -> (@Sendable () -> Void)? in
                state.retireFinished = true
                defer { state.onRetired = nil }
                return state.onRetired
            }
            onRetired?()
        }
    }

    /// Runs `work` on this generation's control queue, after everything queued there before (tests: a test holds
    /// the queue to see what waits for it).
    func enqueueOnControlQueue(_ work: @escaping @Sendable () -> Void) {
        controlQueue.async(execute: work)
    }

    /// The instance's runner died: no request is routed here any more (its streams were already failed).
    /// Returns false when the generation had already retired (an expected exit).
    @discardableResult
    func markCrashed() -> Bool {
        state.withLock { state in
            guard state.phase != .retired else { return false }
            state.phase = .crashed
            return true
        }
    }

    /// Waits until this generation's control queue ran everything queued so far (tests and shutdown).
    func waitForControlQueue() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            controlQueue.async { continuation.resume() }
        }
    }
}
