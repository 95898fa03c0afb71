// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMLogging
import CAFMBackendABI
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
    }

    /// The backend id.
    public let backendID: String
    /// Generation number, increasing per backend from 1.
    public let number: UInt64
    /// The loaded library this instance lives in.
    public let library: BackendLibrary
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

    let instance: Instance
    private let controlQueue: DispatchQueue
    private let logger: Logger
    private let state = Mutex(State())

    /// The backend's instance pointer. Safety: `generate`, `cancel` and `get_extension` are [thread-safe] by the
    /// ABI, and `destroy` is called once, on the control queue, only when no generation is in flight
    /// (`State.inflight == 0`) and never after a stream was cut off by the watchdog.
    struct Instance: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    struct State {
        var phase: Phase = .active
        var inflight = 0
        var streams: [UInt64: GenerationStream] = [:]
        /// A stream was cut off while its backend may still run it: destroying the instance could free memory
        /// that backend thread still uses, so such a generation is leaked instead of destroyed.
        var hasAbandonedStreams = false
        var completed: UInt64 = 0
    }

    private init(
        backendID: String, number: UInt64, library: BackendLibrary, description: BackendDescription,
        configDocument: [UInt8], settings: [String: String], instance: Instance, controlQueue: DispatchQueue, logger: Logger
    ) {
        self.settings = settings
        self.fileStamps = FileStamp.stamps(ofFilesIn: settings)
        self.backendID = backendID
        self.number = number
        self.library = library
        self.described = Mutex(description)
        self.configDocument = configDocument
        self.instance = instance
        self.controlQueue = controlQueue
        self.logger = logger
    }

    /// Creates and describes a new instance on a fresh control queue.
    ///
    /// - Throws: `BackendLoadError` with reason `create_failed` or `describe_failed`.
    static func make(
        library: BackendLibrary, number: UInt64, configDocument: [UInt8], settings: [String: String], logger: Logger
    ) async throws(BackendLoadError) -> BackendGeneration {
        let queue = DispatchQueue(label: "afm.backend.\(library.backendID).g\(number)")
        let result: Result<BackendGeneration, BackendLoadError> = await withCheckedContinuation { continuation in
            queue.async {
                continuation.resume(
                    returning: Self.createOnControlQueue(
                        library: library, number: number, configDocument: configDocument, settings: settings, queue: queue,
                        logger: logger))
            }
        }
        return try result.get()
    }

    private static func createOnControlQueue(
        library: BackendLibrary, number: UInt64, configDocument: [UInt8], settings: [String: String], queue: DispatchQueue,
        logger: Logger
    ) -> Result<BackendGeneration, BackendLoadError> {
        let table = library.vtable
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        var created: OpaquePointer?
        let status = configDocument.withUnsafeBytes { bytes in
            table.create(
                library.host.pointer,
                afm_str(data: bytes.baseAddress?.assumingMemoryBound(to: CChar.self), size: UInt64(bytes.count)),
                &created, &error)
        }
        guard status == AFM_OK, let created else {
            let code = AFMErrorCode(abiValue: status == AFM_OK ? AFM_ERR_INTERNAL : status)
            let message = status == AFM_OK ? "create returned AFM_OK without an instance" : error.messageString
            return .failure(
                BackendLoadError(
                    path: library.sourcePath, "create failed (\(code.rawValue)): \(message)", reason: "create_failed"))
        }
        let instance = Instance(pointer: created)
        var description: BackendDescription?
        var describeFailure: String?
        switch describe(library: library, instance: instance) {
        case .success(let parsed): description = parsed
        case .failure(let failure): describeFailure = failure.message
        }
        guard let description else {
            table.destroy(created)
            return .failure(
                BackendLoadError(path: library.sourcePath, describeFailure ?? "describe failed", reason: "describe_failed"))
        }
        return .success(
            BackendGeneration(
                backendID: library.backendID, number: number, library: library, description: description,
                configDocument: configDocument, settings: settings, instance: instance, controlQueue: queue,
                logger: logger.with("generation", String(number))))
    }

    /// Whether a generation built now from `settings` would differ from this one: other settings, or a file
    /// they name changed on disk.
    func isOutdated(comparedWith settings: [String: String]) -> Bool {
        settings != self.settings || FileStamp.stamps(ofFilesIn: settings) != fileStamps
    }

    /// Calls the backend's describe and parses the document. [control-thread]
    private static func describe(library: BackendLibrary, instance: Instance) -> Result<BackendDescription, DescribeError> {
        let collector = DocumentCollector()
        var writer = afm_writer(
            struct_size: UInt32(MemoryLayout<afm_writer>.size), reserved0: 0,
            ctx: Unmanaged.passUnretained(collector).toOpaque(), write: documentWriteTrampoline)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = withExtendedLifetime(collector) { library.vtable.describe(instance.pointer, &writer, &error) }
        guard status == AFM_OK else { return .failure(DescribeError(message: "describe failed: \(error.messageString)")) }
        do {
            return .success(try BackendDescription(document: collector.bytes))
        } catch {
            return .failure(error)
        }
    }

    /// Asks the backend to describe itself again (on the control queue) and keeps the new document. A failing
    /// describe keeps the previous document and returns false.
    @discardableResult
    func refreshDescription() async -> Bool {
        let library = self.library
        let instance = self.instance
        let result: Result<BackendDescription, DescribeError>? = await withCheckedContinuation { continuation in
            controlQueue.async { [self] in
                guard snapshot.phase != .retired else {
                    continuation.resume(returning: nil)
                    return
                }
                continuation.resume(returning: Self.describe(library: library, instance: instance))
            }
        }
        guard case .success(let fresh)? = result else { return false }
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

    func release() {
        let retire = state.withLock { state -> Bool in
            state.inflight -= 1
            state.completed += 1
            return state.phase == .draining && state.inflight == 0
        }
        if retire { retireNow() }
    }

    /// Current phase and number of requests in flight.
    public var snapshot: (phase: Phase, inflight: Int, completed: UInt64) {
        state.withLock { ($0.phase, $0.inflight, $0.completed) }
    }

    // MARK: - Generating

    /// Starts a generation. The stream's terminal event releases `lease`.
    func start(requestDocument: [UInt8], lease: BackendLease, limits: GenerationLimits) throws(AFMError) -> GenerationStream {
        let table = GenerationTable.shared
        let id = table.makeID()
        let sink = table.makeSink(for: id)
        let instance = self.instance
        let vtable = library.vtable
        let stream = GenerationStream(
            id: id,
            silenceLimit: limits.silenceLimit,
            cancelGrace: limits.cancelGrace,
            onCancel: {
                vtable.cancel(instance.pointer, id)
            },
            onTerminal: { [weak self] expired in
                table.remove(id)
                if expired {
                    // The backend may still call the sink: leave it out of the pool for good.
                    self?.state.withLock { $0.hasAbandonedStreams = true }
                } else {
                    table.recycle(sink)
                }
                self?.state.withLock { _ = $0.streams.removeValue(forKey: id) }
                lease.release()
            })
        table.register(stream)
        Watchdog.shared.ensureRunning()
        state.withLock { $0.streams[id] = stream }

        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = requestDocument.withUnsafeBytes { bytes in
            vtable.generate(
                instance.pointer, id,
                afm_str(data: bytes.baseAddress?.assumingMemoryBound(to: CChar.self), size: UInt64(bytes.count)),
                sink.pointer, &error)
        }
        if status != AFM_OK {
            // Refused synchronously: no event will come (ABI rule), so undo the registration here.
            table.remove(id)
            table.recycle(sink)
            state.withLock { _ = $0.streams.removeValue(forKey: id) }
            lease.release()
            let code = AFMErrorCode(abiValue: status)
            let message = error.messageString
            throw AFMError(code, message.isEmpty ? "the backend refused the request (\(code.rawValue))" : message)
        }
        stream.armCancel()
        return stream
    }

    /// Counts input tokens with the backend's `afm.tokenize/1` extension, or nil when it has none.
    func countInputTokens(requestDocument: [UInt8]) -> Int? {
        guard let getExtension = library.vtable.getExtension,
            let raw = getExtension(instance.pointer, AFM_EXT_TOKENIZE)
        else { return nil }
        let tokenize = raw.assumingMemoryBound(to: afm_ext_tokenize.self).pointee
        guard tokenize.struct_size >= UInt32(MemoryLayout<afm_ext_tokenize>.size), let count = tokenize.count_input_tokens
        else { return nil }
        var tokens: Int64 = 0
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = requestDocument.withUnsafeBytes { bytes in
            count(
                instance.pointer,
                afm_str(data: bytes.baseAddress?.assumingMemoryBound(to: CChar.self), size: UInt64(bytes.count)),
                &tokens, &error)
        }
        return status == AFM_OK && tokens >= 0 ? Int(tokens) : nil
    }

    // MARK: - Draining and retiring

    /// Stops routing to this generation; it retires when its last request ends, or at `deadline` its remaining
    /// requests are cancelled.
    func beginDrain(deadline: Duration) {
        let idle = state.withLock { state -> Bool in
            guard state.phase == .active else { return false }
            state.phase = .draining
            return state.inflight == 0
        }
        if idle {
            retireNow()
            return
        }
        logger.info("draining", ["deadline_s": String(deadline.components.seconds)])
        controlQueue.asyncAfter(deadline: .now() + .milliseconds(Int(deadline.components.seconds * 1000))) { [self] in
            let remaining = state.withLock { Array($0.streams.values) }
            if !remaining.isEmpty {
                logger.warning("drain deadline passed; cancelling remaining requests", ["requests": String(remaining.count)])
            }
            for stream in remaining { stream.cancel() }
        }
    }

    private func retireNow() {
        let (shouldDestroy, abandoned) = state.withLock { state -> (Bool, Bool) in
            guard state.phase != .retired else { return (false, false) }
            state.phase = .retired
            return (!state.hasAbandonedStreams, state.hasAbandonedStreams)
        }
        guard shouldDestroy || abandoned else { return }
        if abandoned {
            logger.warning("retired without destroy: a request was cut off while the backend may still run it")
            return
        }
        let instance = self.instance
        let destroy = library.vtable.destroy
        let logger = self.logger
        controlQueue.async {
            destroy(instance.pointer)
            logger.info("retired")
        }
    }

    /// Waits until this generation's control queue ran everything queued so far (tests and shutdown).
    func waitForControlQueue() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            controlQueue.async { continuation.resume() }
        }
    }
}

/// Collects the bytes a backend writes through an `afm_writer`.
private final class DocumentCollector {
    var bytes: [UInt8] = []
}

private let documentWriteTrampoline: @convention(c) (UnsafeMutableRawPointer?, afm_str) -> Void = { context, chunk in
    guard let context else { return }
    let collector = Unmanaged<DocumentCollector>.fromOpaque(context).takeUnretainedValue()
    guard collector.bytes.count + Int(min(chunk.size, 64 << 20)) <= 64 << 20 else { return }  // 64 MiB cap
    collector.bytes += chunk.bytes()
}
