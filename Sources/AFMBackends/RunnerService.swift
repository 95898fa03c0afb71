// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMLogging
import AFMSystem
import CAFMBackendABI
import Dispatch
import Foundation
import Synchronization

/// The runner side of runner hosting: what `afm-backend-runner` runs. It loads one backend library with the same
/// loader as in-process hosting (`BackendLibrary`, `BackendInstance`) and serves the runner protocol on its
/// channel.
///
/// ```
///  channel ──► reader thread ─┬─ load/create/describe/destroy ──► control thread (serial: [control-thread])
///                             ├─ generate ───────────────────────► a thread per call (concurrent: [thread-safe])
///                             ├─ tokenize ───────────────────────► RunnerCallPool: ≤ 4 threads, ≤ 8 waiting, else busy
///                             └─ cancel/credit ──────────────────► inline (non-blocking)
///  backend threads ──emit()──► RunnerRelay (credit window) ──► event frames ──► channel
/// ```
///
/// End of file on the channel (the host is gone) ends the process at once.
public final class RunnerService: Sendable {
    /// Events a generation may have unacknowledged (the host's stream buffer is as large).
    static let window = RunnerInstanceHost.creditWindow

    private let channel: RunnerChannel
    private let outbox: RunnerOutbox
    private let logger: Logger
    /// Serial: load, create, describe, destroy.
    private let controlQueue: RunnerWorkThread
    /// `tokenize` calls: at most ``tokenizerThreads`` at once and ``tokenizerWaiting`` waiting, else `busy`.
    private let tokenizers = RunnerCallPool(
        name: "afm-runner-tok", maximumThreads: RunnerService.tokenizerThreads, maximumWaiting: RunnerService.tokenizerWaiting)
    /// Tokenizing threads a runner runs at once (a count tokenizes the whole request: CPU work).
    static let tokenizerThreads = 4
    /// Tokenizer calls that may wait for a thread; kept small so a wait stays far from the host's 30 s deadline.
    static let tokenizerWaiting = 8
    private let state = Mutex(State())

    struct State {
        var library: BackendLibrary?
        var instance: BackendInstance?
    }

    private init(channel: RunnerChannel, logger: Logger) throws(SystemCallError) {
        self.channel = channel
        self.outbox = RunnerOutbox(channel: channel)
        self.logger = logger
        self.controlQueue = try RunnerWorkThread(name: "afm-runner-ctl")
    }

    /// Serves the protocol on `descriptor` until the host closes the channel or sends `shutdown`, then exits the
    /// process.
    public static func serve(descriptor: FileDescriptor, logger: Logger) -> Never {
        let service: RunnerService
        do {
            service = try RunnerService(channel: RunnerChannel(descriptor: descriptor), logger: logger)
            try service.outbox.start()
        } catch {
            logger.error("cannot start the runner's threads; exiting", ["error": error.description])
            CurrentProcess.exitImmediately(71)
        }
        var greeted = false
        let reason = service.channel.readFrames { frame in
            if !greeted {
                guard case .hello(let version, _, _) = frame else {
                    logger.error("the host did not start with hello; exiting")
                    CurrentProcess.exitImmediately(2)
                }
                service.channel.send(.helloReply(version: RunnerFrame.protocolVersion, pid: UInt32(CurrentProcess.id)))
                guard version == RunnerFrame.protocolVersion else {
                    logger.error(
                        "the host speaks runner protocol \(version), this runner \(RunnerFrame.protocolVersion); exiting")
                    CurrentProcess.exitImmediately(2)
                }
                greeted = true
                return
            }
            service.handle(frame)
        }
        if reason != "end of file" { logger.error("runner channel failed; exiting", ["reason": reason]) }
        // No `destroy` first: the host is gone, and a destroy stuck behind a hung generation would leave an orphan
        // runner holding the model's memory. The process exit is the cleanup (its unjoined backend threads too).
        CurrentProcess.exitImmediately(0)
    }

    private func handle(_ frame: RunnerFrame) {
        switch frame {
        case .load(let seq, let manifestPath, let copyDirectory, let uniqueName):
            controlQueue.async { self.load(seq: seq, manifestPath: manifestPath, copyDirectory: copyDirectory, uniqueName: uniqueName) }
        case .create(let seq, let config):
            controlQueue.async { self.create(seq: seq, config: config) }
        case .describe(let seq):
            controlQueue.async { self.describe(seq: seq) }
        case .destroy(let seq):
            controlQueue.async {
                let instance = self.state.withLock { state -> BackendInstance? in
                    defer { state.instance = nil }
                    return state.instance
                }
                instance?.destroy()
                self.outbox.send(.reply(seq: seq, status: AFM_OK, value: 0, message: "", payload: []))
            }
        case .generate(let seq, let requestID, let request):
            let started = RunnerWorkThread.detached(name: "afm-runner-gen") {
                self.generate(seq: seq, requestID: requestID, request: request)
            }
            if !started { refuse(seq: seq, "the runner cannot start a thread for the call") }
        case .tokenize(let seq, let request):
            let accepted = tokenizers.submit {
                let count = self.state.withLock { $0.instance }?.countInputTokens(document: request)
                self.outbox.send(.reply(seq: seq, status: AFM_OK, value: Int64(count ?? -1), message: "", payload: []))
            }
            if !accepted {
                outbox.send(
                    .reply(
                        seq: seq, status: AFM_ERR_BUSY, value: 0,
                        message: "the runner is already tokenizing \(Self.tokenizerThreads) requests with \(Self.tokenizerWaiting) more waiting",
                        payload: []))
            }
        case .cancel(let requestID):
            RunnerRelayTable.shared.lookup(requestID)?.cancel()
            state.withLock { $0.instance }?.cancel(requestID: requestID)
        case .credit(let requestID, let events):
            RunnerRelayTable.shared.lookup(requestID)?.grant(Int(events))
        case .shutdown:
            // The host sent `destroy` before (`retire`), or it abandons the instance and wants no destroy.
            CurrentProcess.exitImmediately(0)
        case .hello, .helloReply, .reply, .event:
            logger.warning("ignoring a frame the host should not send")
        }
    }

    /// Answers a call with `AFM_ERR_INTERNAL` (the host turns it into an error for that request only).
    private func refuse(seq: UInt64, _ message: String) {
        outbox.send(.reply(seq: seq, status: AFM_ERR_INTERNAL, value: 0, message: message, payload: []))
    }

    // MARK: - Control calls

    private func load(seq: UInt64, manifestPath: String, copyDirectory: String, uniqueName: String) {
        do throws(BackendLoadError) {
            let manifest = try BackendManifest(contentsOf: manifestPath)
            let library = try BackendLibrary(
                manifest: manifest, copyDirectory: copyDirectory, uniqueName: uniqueName, logger: logger)
            // The mapping stays; the file is only needed to dlopen it (the process exit unloads the library).
            try? FileManager.default.removeItem(atPath: library.loadedPath)
            state.withLock { $0.library = library }
            let info: JSONValue = [
                "id": .string(library.backendID), "version": .string(library.version),
                "abi_major": .number(JSONNumber(Int(library.abiMajor))), "abi_minor": .number(JSONNumber(Int(library.abiMinor))),
            ]
            outbox.send(.reply(seq: seq, status: AFM_OK, value: 0, message: "", payload: info.encoded()))
        } catch {
            reply(seq: seq, error)
        }
    }

    private func create(seq: UInt64, config: [UInt8]) {
        guard let library = state.withLock({ $0.library }) else {
            reply(seq: seq, BackendLoadError(path: "runner", "create before load", reason: "create_failed"))
            return
        }
        do throws(BackendLoadError) {
            let instance = try BackendInstance.create(library: library, configDocument: config)
            state.withLock { $0.instance = instance }
            outbox.send(.reply(seq: seq, status: AFM_OK, value: 0, message: "", payload: []))
        } catch {
            reply(seq: seq, error)
        }
    }

    private func describe(seq: UInt64) {
        guard let instance = state.withLock({ $0.instance }) else {
            reply(seq: seq, BackendLoadError(path: "runner", "describe before create", reason: "describe_failed"))
            return
        }
        do throws(BackendLoadError) {
            let document = try instance.describeDocument()
            outbox.send(.reply(seq: seq, status: AFM_OK, value: 0, message: "", payload: document))
        } catch {
            reply(seq: seq, error)
        }
    }

    /// A load error travels as status `AFM_ERR_INTERNAL`, the message, and `{"path":…,"reason":…}`.
    private func reply(seq: UInt64, _ error: BackendLoadError) {
        let detail: JSONValue = ["path": .string(error.path), "reason": .string(error.reason)]
        outbox.send(.reply(seq: seq, status: AFM_ERR_INTERNAL, value: 0, message: error.message, payload: detail.encoded()))
    }

    // MARK: - Generations

    private func generate(seq: UInt64, requestID: UInt64, request: [UInt8]) {
        guard let instance = state.withLock({ $0.instance }) else {
            outbox.send(.reply(seq: seq, status: AFM_ERR_INTERNAL, value: 0, message: "generate before create", payload: []))
            return
        }
        let relay = RunnerRelay(id: requestID, window: Self.window, outbox: outbox)
        RunnerRelayTable.shared.insert(relay)
        if let refusal = instance.generate(requestID: requestID, document: request, sink: relay.sinkPointer) {
            relay.discard()
            outbox.send(.reply(seq: seq, status: refusal.code.abiValue, value: 0, message: refusal.message, payload: []))
            return
        }
        outbox.send(.reply(seq: seq, status: AFM_OK, value: 0, message: "", payload: []))
    }
}
