// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Dispatch
import Foundation
import Synchronization

/// One instance of the scripted backend: a script, a record log and the generations running on their threads.
///
/// The `AFMBackend` of the scripted backend: AFMBackendKit's C entry points own the instance (`create()` makes
/// it, `destroy()` joins every thread and releases it) and turn its thrown `BackendError`s into status codes.
///
/// ```
/// generate ─► validate ─► register ─► record "generate" ─► worker thread ─► StepPlayer.run ─► unregister ─► leave
///                                                       └─► (an answer that never waits) StepPlayer.run inside generate
/// cancel   ─► record "cancel" ─► Generation.cancel (wakes any delay or hang)
/// destroy  ─► cancel all ─► wait for the thread group ─► record "destroy" ─► close the record file
/// ```
final class ScriptedInstance: TokenCountingBackend {
    /// The stable backend id (also the manifest id).
    static let id: StaticString = "scripted"
    /// The backend's own version, reported at negotiation and (unless `Version` overrides it) in describe: one
    /// literal for both, so a rebuilt (or, in tests, a patched) library reports one consistent version.
    static let version: StaticString = "1.0.0"

    /// The settings from the config document.
    let config: BackendConfig
    /// The models served.
    let script: Script
    /// The host's logging table.
    let host: HostAPI
    /// The record file (or a log that drops everything).
    let records: RecordLog

    private struct State {
        var running: [UInt64: Generation] = [:]
        var destroyed = false
    }

    private let state = Mutex(State())
    /// Entered before a generation thread starts, left as the very last thing it does; `destroy()` waits on it.
    /// Counts running generations (destroy waits for them), on threads from `workers`.
    private let threads = DispatchGroup()
    private let workers = WorkerPool(name: "afm-scripted")

    /// Creates an instance from a config document.
    ///
    /// - Throws: `BackendError` for a bad config, an unreadable or malformed script, or an unopenable record file.
    init(host: HostAPI, configJSON: Data) throws(BackendError) {
        let config = try BackendConfig(parsing: configJSON)
        let script: Script
        if let path = config.scriptPath {
            script = try Script(contentsOf: path, defaultContextTokens: config.contextTokens)
        } else {
            script = Script.demo(contextTokens: config.contextTokens)
        }
        let records =
            try config.recordPath.map { path throws(BackendError) in try RecordLog(path: path) } ?? RecordLog()
        self.config = config
        self.script = script
        self.host = host
        self.records = records
        records.append("create", [("config", config.documentJSON)])
        let modelList = script.models.map(\.id).joined(separator: ", ")
        let source = config.scriptPath.map { "from \($0)" } ?? "built-in demo"
        host.log(AFM_LOG_INFO, "scripted instance \(config.instance): models \(modelList) (\(source))")
    }

    // MARK: - Describe

    /// The describe document: every model of the script with its budgets and capabilities.
    func describeDocument() -> String {
        BackendDescription(
            backend: Self.id.description, version: config.version ?? Self.version.description,
            models: script.models.map {
                ModelDescription(
                    id: $0.id, contextTokens: $0.contextTokens, maxInputTokens: $0.maxInputTokens,
                    maxOutputTokens: $0.maxOutputTokens, capabilities: $0.capabilities)
            }
        ).json
    }

    // MARK: - Generate

    /// Validates a request and starts its generation on a new thread.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` for malformed JSON or a request id already running;
    ///   `AFM_ERR_MODEL_UNAVAILABLE` for a model the script lacks; `AFM_ERR_CONTEXT_LENGTH_EXCEEDED` when the input
    ///   is over the model's input budget. Nothing is emitted then.
    func generate(requestID: UInt64, requestJSON: UnsafeBufferPointer<UInt8>, sink: EventSink)
        throws(BackendError)
    {
        let document: JSONNode
        do {
            document = try GenerationRequest.document(parsing: requestJSON)
        } catch {
            let refusal = BackendError.invalidRequest("generation request: \(error.message)")
            records.append(
                "generate", requestID: requestID,
                [
                    ("accepted", "false"), ("error", "\"invalid_request\""), ("request", "null"),
                    ("request_text", JSON.quote(String(decoding: requestJSON, as: UTF8.self))),
                ])
            throw refusal
        }
        // The record keeps the document's bytes as received (it just parsed, so it is valid JSON), so tests see
        // the host's key order; raw newlines can only be whitespace between tokens and become spaces.
        let requestRecord =
            records.isEnabled
            ? String(decoding: requestJSON.map { $0 == 0x0A || $0 == 0x0D ? 0x20 : $0 }, as: UTF8.self) : "null"
        do {
            let generation = try prepare(requestID: requestID, document: document, sink: sink)
            records.append("generate", requestID: requestID, [("accepted", "true"), ("request", requestRecord)])
            start(generation)
        } catch {
            records.append(
                "generate", requestID: requestID,
                [
                    ("accepted", "false"), ("error", JSON.quote(ErrorCodeName.name(ofError: error.code))),
                    ("request", requestRecord),
                ])
            throw error
        }
    }

    /// Checks a parsed request and registers its generation (not yet started).
    private func prepare(requestID: UInt64, document: JSONNode, sink: EventSink) throws(BackendError) -> Generation {
        let request = try GenerationRequest(parsing: document)
        guard let model = script.model(withID: request.model) else {
            let served = script.models.map { "\"\($0.id)\"" }.joined(separator: ", ")
            throw .modelUnavailable(
                "model \"\(request.model)\" is not served by the scripted backend (models: \(served))")
        }
        guard request.inputTokens <= model.maxInputTokens else {
            throw BackendError(
                AFM_ERR_CONTEXT_LENGTH_EXCEEDED,
                "input is \(request.inputTokens) tokens; model \"\(model.id)\" accepts at most \(model.maxInputTokens)")
        }
        let generation = Generation(requestID: requestID, request: request, model: model, sink: sink)
        let refusal: BackendError? = state.withLock { state in
            if state.destroyed { return .internal("generate called after destroy") }
            if state.running[requestID] != nil { return .invalidRequest("request_id \(requestID) is already running") }
            state.running[requestID] = generation
            return nil
        }
        if let refusal { throw refusal }
        return generation
    }

    /// Runs a registered generation: inside `generate` when its model's answer never waits (every event is at
    /// hand, and few enough that the host takes them all without blocking: docs/backend-abi.md, "Events from
    /// inside generate"), otherwise on a worker thread of its own (reused across generations).
    private func start(_ generation: Generation) {
        if generation.model.playsInsideGenerate {
            play(generation)
            return
        }
        threads.enter()
        workers.submit { [self] in
            play(generation)
            threads.leave()
        }
    }

    /// Plays a generation to its end on the calling thread and unregisters it.
    private func play(_ generation: Generation) {
        var player = StepPlayer(generation: generation, records: records)
        player.run()
        _ = state.withLock { $0.running.removeValue(forKey: generation.requestID) }
    }

    // MARK: - Cancel and destroy

    /// Records the cancel and stops the generation, if it is running. Non-blocking and idempotent.
    func cancel(requestID: UInt64) {
        let generation = state.withLock { $0.running[requestID] }
        records.append(
            "cancel", requestID: requestID,
            [
                ("running", generation == nil ? "false" : "true"),
                ("in_emit", generation?.sink.isEmittingOnCallingThread == true ? "true" : "false"),
            ])
        generation?.cancel()
    }

    /// Joins every generation thread (cancelling any still running, which a well-behaved host never leaves), then
    /// records `destroy` and closes the record file.
    func destroy() {
        let leftovers = state.withLock { state in
            state.destroyed = true
            return Array(state.running.values)
        }
        if !leftovers.isEmpty {
            host.log(AFM_LOG_WARNING, "destroy with \(leftovers.count) generation(s) still running; cancelling them")
        }
        for generation in leftovers { generation.cancel() }
        threads.wait()
        workers.stop()
        records.append("destroy", [("leftover_generations", "\(leftovers.count)")])
        records.close()
    }

    // MARK: - Extensions

    /// `afm.tokenize/1`: the input tokens of a request by the same rule as usage (ceil(bytes / 4)), after the model's
    /// `tokenize_delay_ms`.
    func countInputTokens(requestJSON: Data) throws(BackendError) -> Int {
        let document: JSONNode
        do {
            document = try GenerationRequest.document(from: requestJSON)
        } catch {
            throw .invalidRequest("generation request: \(error.message)")
        }
        let request = try GenerationRequest(parsing: document)
        guard let model = script.model(withID: request.model) else {
            throw .modelUnavailable("model \"\(request.model)\" is not served by the scripted backend")
        }
        if model.tokenizeDelayMilliseconds > 0 { Thread.sleep(forTimeInterval: Double(model.tokenizeDelayMilliseconds) / 1000) }
        return request.inputTokens
    }
}
