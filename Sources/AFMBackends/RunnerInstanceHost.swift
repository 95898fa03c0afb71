// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import AFMLogging
import AFMSystem
import CAFMBackendABI
import Dispatch
import Foundation
import Synchronization

/// Runner hosting: one backend instance in its own `afm-backend-runner` process, driven over a socketpair with
/// the runner protocol (`RunnerFrame`, docs/backend-abi.md "Runner protocol").
///
/// ```
///  afmd                                                     afm-backend-runner (one per generation)
///  ─────                                                    ──────────────────
///  generate/cancel/credit ──frames──► [socketpair, fd 3] ──► RunnerService ──► backend .so (same ABI)
///  relay thread ◄──event/reply frames───────────────────────  RunnerRelay ◄── emit()
///    └─► GenerationStream.receive(waitForRoom: false)       (credit window bounds what is in flight)
///  waiter thread: waitpid ──► every live stream fails with backend_crashed ──► registry restarts the backend
/// ```
///
/// - Calls that need an answer (`load`, `create`, `describe`, `generate`, `tokenize`, `destroy`) wait for their
///   reply with a deadline; a runner that misses it is hung and is killed with `SIGKILL`. `generate` and
///   `tokenize` are called synchronously by the request path like the in-process vtable, so they wait on the
///   calling thread for one round trip (tens of microseconds).
/// - A stream the watchdog cuts off (silent, or ignoring a cancel) means the backend may still run it: the
///   runner is killed, which fails its other requests and restarts the backend.
final class RunnerInstanceHost: BackendInstanceHost {
    /// Events one generation may have in flight between runner and host; also the host stream's buffer size.
    static let creditWindow = 256

    let backendID: String
    let child: ChildProcess
    private let channel: RunnerChannel
    private let logger: Logger
    private let onExit: @Sendable (RunnerExit) -> Void
    private let state = Mutex(State())
    private let nextSeq = Atomic<UInt64>(1)
    /// The ABI minor the backend reported in negotiation (the `load` reply), for the describe document.
    private let backendABIMinor = Atomic<UInt32>(0)
    private let exited = DispatchSemaphore(value: 0)
    private let readerDone = DispatchSemaphore(value: 0)

    struct State {
        var calls: [UInt64: PendingCall] = [:]
        var streams: [UInt64: GenerationStream] = [:]
        var alive = true
        /// `waitpid` returned: the pid may be reused from now on, so it is never signalled again.
        var reaped = false
        var expectingExit = false
        var killReason: String?
    }

    var hosting: BackendManifest.Hosting { .runner }
    var processID: Int32? { child.pid }

    /// False once the runner's exit was handled (its streams failed; `onExit` runs right after).
    var isAlive: Bool { state.withLock { $0.alive } }

    private init(
        backendID: String, child: ChildProcess, channel: RunnerChannel, logger: Logger,
        onExit: @escaping @Sendable (RunnerExit) -> Void
    ) {
        self.backendID = backendID
        self.child = child
        self.channel = channel
        self.logger = logger
        self.onExit = onExit
    }

    // MARK: - Launch

    /// Where `afm-backend-runner` is by default: next to the running executable.
    /// Where afmd finds `afm-backend-runner`, relative to itself so the same build runs from `.build/` and from
    /// `/usr`: next to afmd (a build directory), else `../lib/afm/runner/` (installed: `/usr/sbin/afmd` →
    /// `/usr/lib/afm/runner/afm-backend-runner`, DESIGN §10).
    static func defaultRunnerPath() -> String {
        let executable = CurrentProcess.executablePath() ?? "/usr/sbin/afmd"
        let directory = (executable as NSString).deletingLastPathComponent as NSString
        let besideDaemon = directory.appendingPathComponent("afm-backend-runner")
        let installed = ((directory.deletingLastPathComponent as NSString).appendingPathComponent("lib/afm/runner") as NSString)
            .appendingPathComponent("afm-backend-runner")
        if !FileManager.default.isExecutableFile(atPath: besideDaemon) && FileManager.default.isExecutableFile(atPath: installed) {
            return installed
        }
        return besideDaemon
    }

    /// Starts a runner for `manifest`, negotiates, and creates the instance. Blocks (run it on a control queue).
    ///
    /// - Parameters:
    ///   - onExit: called once, on the runner's waiter thread, after the process ended and its streams were failed.
    /// - Throws: `BackendLoadError`: `runner_failed` when the runner cannot start or answer, or the loader's own
    ///   reasons (`abi_mismatch`, `missing_entry`, `create_failed`, …) relayed from the runner.
    static func launch(
        manifest: BackendManifest, runnerPath: String, limits: RunnerLimits, copyDirectory: String, uniqueName: String,
        configDocument: [UInt8], logger: Logger, onExit: @escaping @Sendable (RunnerExit) -> Void
    ) throws(BackendLoadError) -> RunnerInstanceHost {
        let host: RunnerInstanceHost
        do throws(SystemCallError) {
            let (mine, theirs) = try FileDescriptor.makeSocketPair()
            // A runner that stops reading must not block a request thread for long.
            try? mine.setSendTimeout(milliseconds: 10_000)
            let child: ChildProcess
            do throws(SystemCallError) {
                child = try ChildProcess.spawn(
                    path: runnerPath,
                    arguments: [
                        "--channel-fd", String(ChildProcess.channelDescriptor), "--backend", manifest.id,
                        "--base-nice", String(ResourceLimits.processNice()),
                    ] + limits.arguments,
                    environment: environment(for: manifest), channel: theirs)
            } catch {
                theirs.close()
                mine.close()
                throw error
            }
            theirs.close()
            host = RunnerInstanceHost(
                backendID: manifest.id, child: child, channel: RunnerChannel(descriptor: mine),
                logger: logger.with("runner_pid", String(child.pid)), onExit: onExit)
            try host.startThreads()
        } catch {
            throw BackendLoadError(path: runnerPath, "cannot start the backend runner: \(error)", reason: "runner_failed")
        }
        do throws(BackendLoadError) {
            try host.handshake(runnerPath: runnerPath)
            let loaded = try host.call(timeout: .seconds(120), path: manifest.libraryPath) { seq in
                .load(seq: seq, manifestPath: manifest.manifestPath, copyDirectory: copyDirectory, uniqueName: uniqueName)
            }
            let minor = (try? JSONParser.parse(loaded.payload))?["abi_minor"]?.numberValue?.intValue ?? 0
            host.backendABIMinor.store(UInt32(clamping: minor), ordering: .relaxed)
            try host.call(timeout: .seconds(1800), path: manifest.libraryPath) { seq in
                .create(seq: seq, config: configDocument)
            }
        } catch {
            host.retire(abandoned: true)
            throw error
        }
        host.logger.info("runner started")
        return host
    }

    /// The sanitizers' options. A sanitizer build's runner must run with the options afmd runs with (`make
    /// test-asan` turns off ASan's SIGSEGV handler so that a backend's segfault ends the runner with the signal
    /// afmd reports, and names the suppression files); an ordinary runner ignores them.
    static let sanitizerVariables = ["ASAN_OPTIONS", "LSAN_OPTIONS", "TSAN_OPTIONS", "UBSAN_OPTIONS"]

    /// The runner's environment: only what it needs, with the library path scoped to the backend's directory.
    static func environment(for manifest: BackendManifest) -> [String] {
        let inherited = ProcessInfo.processInfo.environment
        var environment = [
            "LD_LIBRARY_PATH=\((manifest.libraryPath as NSString).deletingLastPathComponent)",
            "PATH=/usr/local/bin:/usr/bin:/bin",
            "AFM_BACKEND_ID=\(manifest.id)",
        ]
        for key in ["HOME", "TMPDIR", "LANG", "LC_ALL", "TZ", "AFM_LOG_LEVEL", "SWIFT_BACKTRACE"] + Self.sanitizerVariables {
            if let value = inherited[key] { environment.append("\(key)=\(value)") }
        }
        // OpenMP tuning (OMP_WAIT_POLICY, GOMP_SPINCOUNT, …) is the operator's: a compute backend's thread team
        // behaves very differently on cores it shares with other work (Plugins/local/README.md).
        // So are the backend's own switches, by the exact names its manifest lists (the local backend's
        // AFM_LOCAL_DEBUG, for one): never by prefix, which would also match other components' variables
        // (AFM_OPEN_AI_KEY for a backend `open`, AFM_CLOUD_KEY for `cloud`, afmd's AFM_SERVER_* for `server`).
        let own = Set(manifest.environment)
        for (key, value) in inherited.sorted(by: { $0.key < $1.key })
        where key.hasPrefix("OMP_") || key.hasPrefix("GOMP_") || own.contains(key) {
            environment.append("\(key)=\(value)")
        }
        // A crashing backend should restart quickly: the Swift runtime's symbolicated crash report (seconds on a
        // large backend) is opt-in, by setting SWIFT_BACKTRACE for afmd.
        if inherited["SWIFT_BACKTRACE"] == nil { environment.append("SWIFT_BACKTRACE=enable=no") }
        return environment
    }

    private func startThreads() throws(SystemCallError) {
        try IOThread.spawn(name: "afm-relay-\(child.pid)") { [self] in
            let reason = channel.readFrames { frame in handle(frame) }
            readerDone.signal()
            let expecting = state.withLock { $0.expectingExit }
            if !expecting { logger.debug("runner channel ended", ["reason": reason]) }
            // A runner that closed its channel but keeps running is of no use: give it 2 s, then kill it.
            if exited.wait(timeout: .now() + 2) == .timedOut {
                kill(reason: "it closed its channel (\(reason)) but did not exit")
                exited.wait()
            }
            exited.signal()
            channel.close()
        }.detach()
        try IOThread.spawn(name: "afm-wait-\(child.pid)") { [self] in
            // Wait without reaping, mark it reaped under the lock, then reap: a signal sent under the lock
            // (`signalUnlessReaped`) can never reach a recycled pid.
            child.waitUntilExited()
            state.withLock { $0.reaped = true }
            let status = child.wait()
            exited.signal()
            // Let the relay thread deliver what the runner sent before it died (its events come first).
            if readerDone.wait(timeout: .now() + 1) == .timedOut { channel.shutdown() } else { readerDone.signal() }
            handleExit(status)
        }.detach()
    }

    private func handshake(runnerPath: String) throws(BackendLoadError) {
        let call = PendingCall()
        state.withLock { $0.calls[0] = call }
        channel.send(.hello(version: RunnerFrame.protocolVersion, abiMajor: AFMVersion.abiMajor, abiMinor: AFMVersion.abiMinor))
        guard let reply = call.wait(timeout: .seconds(30)) else {
            kill(reason: "no hello within 30 s")
            throw BackendLoadError(path: runnerPath, "the backend runner did not answer hello", reason: "runner_failed")
        }
        guard reply.status == AFM_OK else {
            throw BackendLoadError(path: runnerPath, reply.message, reason: "runner_failed")
        }
    }

    // MARK: - Calls

    /// A reply: `status` is `AFM_OK` or an `AFM_ERR_*` value.
    struct Reply: Sendable {
        var status: Int32
        var value: Int64
        var message: String
        var payload: [UInt8]
    }

    /// One call waiting for its reply.
    final class PendingCall: Sendable {
        private let result = Mutex<Reply??>(nil)
        private let done = DispatchSemaphore(value: 0)

        /// Delivers the reply (nil: the runner is gone). Only the first delivery counts.
        func complete(_ reply: Reply?) {
            let first = result.withLock { stored -> Bool in
                guard stored == nil else { return false }
                stored = .some(reply)
                return true
            }
            if first { done.signal() }
        }

        /// Waits for the reply; nil when the runner is gone or `timeout` passed (then `timedOut` is true).
        func wait(timeout: Duration) -> Reply? {
            let nanoseconds = Int(clamping: SystemClock.nanoseconds(timeout))
            guard done.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .success else { return nil }
            return result.withLock { $0 ?? nil }
        }
    }

    /// Sends a call and waits for its reply.
    ///
    /// - Throws: `BackendLoadError` with the runner's relayed reason when it answers with an error, or
    ///   `runner_failed` when it dies or misses the deadline (it is then killed).
    @discardableResult
    private func call(timeout: Duration, path: String, _ make: (UInt64) -> RunnerFrame) throws(BackendLoadError) -> Reply {
        switch send(timeout: timeout, make) {
        case .success(let reply):
            guard reply.status == AFM_OK else {
                let detail = (try? JSONParser.parse(reply.payload))?.objectValue
                throw BackendLoadError(
                    path: detail?["path"]?.stringValue ?? path, reply.message,
                    reason: detail?["reason"]?.stringValue ?? AFMErrorCode(abiValue: reply.status).rawValue)
            }
            return reply
        case .failure(let failure):
            throw BackendLoadError(path: path, failure.message, reason: "runner_failed")
        }
    }

    /// Why a call got no reply: the runner is gone (or was killed for missing the deadline).
    struct CallFailure: Error {
        var message: String
    }

    private func send(timeout: Duration, _ make: (UInt64) -> RunnerFrame) -> Result<Reply, CallFailure> {
        let seq = nextSeq.wrappingAdd(1, ordering: .relaxed).oldValue
        let call = PendingCall()
        let alive = state.withLock { state -> Bool in
            guard state.alive else { return false }
            state.calls[seq] = call
            return true
        }
        guard alive else { return .failure(CallFailure(message: goneMessage())) }
        if !channel.send(make(seq)) {
            // The write failed or timed out: the runner is gone or not reading.
            kill(reason: "it stopped reading its channel")
        }
        guard let reply = call.wait(timeout: timeout) else {
            let stillAlive = state.withLock { state -> Bool in
                state.calls[seq] = nil
                return state.alive
            }
            if stillAlive {
                kill(reason: "a call got no reply within \(timeout.components.seconds) s")
            }
            return .failure(CallFailure(message: goneMessage()))
        }
        return .success(reply)
    }

    private func goneMessage() -> String {
        "the backend runner of '\(backendID)' (pid \(child.pid)) is gone"
    }

    // MARK: - Relay thread

    private func handle(_ frame: RunnerFrame) {
        switch frame {
        case .event(let requestID, let event):
            guard let stream = state.withLock({ $0.streams[requestID] }) else { return }
            _ = stream.receive(event, waitForRoom: false)
        case .reply(let seq, let status, let value, let message, let payload):
            let call = state.withLock { $0.calls.removeValue(forKey: seq) }
            call?.complete(Reply(status: status, value: value, message: message, payload: payload))
        case .helloReply(let version, _):
            let call = state.withLock { $0.calls.removeValue(forKey: 0) }
            let ok = version == RunnerFrame.protocolVersion
            call?.complete(
                Reply(
                    status: ok ? AFM_OK : AFM_ERR_INCOMPATIBLE, value: 0,
                    message: ok ? "" : "the backend runner speaks runner protocol \(version); afmd speaks \(RunnerFrame.protocolVersion)",
                    payload: []))
        default:
            logger.warning("ignoring a frame a runner should not send")
        }
    }

    // MARK: - Exit

    /// Ends the runner with `SIGKILL` (a hang, a missed deadline); its exit then fails every request on it.
    func kill(reason: String) {
        let (alive, first) = state.withLock { state -> (Bool, Bool) in
            guard state.alive, !state.reaped else { return (false, false) }
            defer { if state.killReason == nil { state.killReason = reason } }
            return (true, state.killReason == nil)
        }
        // Never signal a reaped process: its pid may already belong to another.
        guard alive else { return }
        if first { logger.warning("killing the backend runner", ["reason": reason]) }
        signalUnlessReaped { $0.killImmediately() }
    }

    private func handleExit(_ status: ChildExitStatus?) {
        let (calls, streams, expected, killReason) = state.withLock { state in
            state.alive = false
            defer {
                state.calls = [:]
                state.streams = [:]
            }
            return (Array(state.calls.values), Array(state.streams.values), state.expectingExit, state.killReason)
        }
        let exit = RunnerExit(status: status, expected: expected && killReason == nil, killReason: killReason)
        for call in calls { call.complete(nil) }
        if exit.expected {
            // Told to exit (shutdown gave up on these requests, or the host went away): not a crash.
            if !streams.isEmpty {
                logger.warning("backend runner stopped with requests in flight", ["requests_cut_off": String(streams.count)])
            }
            let message = "The backend '\(backendID)' was stopped while this request ran (afmd is shutting down)."
            for stream in streams { stream.expire(with: .failed(.cancelled, message: message)) }
        } else {
            logger.error("backend runner died", ["status": exit.summary, "requests_failed": String(streams.count)])
            let message = "The backend '\(backendID)' crashed (\(exit.summary)) and is restarting; retry the request."
            for stream in streams { stream.expire(with: .failed(.backendCrashed, message: message)) }
        }
        onExit(exit)
    }

    // MARK: - BackendInstanceHost

    func describe() throws(BackendLoadError) -> BackendDescription {
        let reply = try call(timeout: .seconds(60), path: backendID) { .describe(seq: $0) }
        do {
            return try BackendDescription(document: reply.payload, backendABIMinor: backendABIMinor.load(ordering: .relaxed))
        } catch {
            throw BackendLoadError(path: backendID, error.message, reason: "describe_failed")
        }
    }

    func generate(requestID: UInt64, document: [UInt8], stream: GenerationStream) throws(AFMError) {
        let registered = state.withLock { state -> Bool in
            guard state.alive else { return false }
            state.streams[requestID] = stream
            return true
        }
        guard registered else { throw AFMError(.backendCrashed, goneMessage() + "; retry the request") }
        switch send(timeout: .seconds(30), { .generate(seq: $0, requestID: requestID, request: document) }) {
        case .success(let reply) where reply.status == AFM_OK:
            return
        case .success(let reply):
            state.withLock { _ = $0.streams.removeValue(forKey: requestID) }
            let code = AFMErrorCode(abiValue: reply.status)
            throw AFMError(code, reply.message.isEmpty ? "the backend refused the request (\(code.rawValue))" : reply.message)
        case .failure(let failure):
            state.withLock { _ = $0.streams.removeValue(forKey: requestID) }
            throw AFMError(.backendCrashed, failure.message + "; retry the request")
        }
    }

    func cancel(requestID: UInt64) {
        channel.send(.cancel(requestID: requestID))
    }

    /// Returns `events` of credit to the runner for one generation (the consumer took them).
    func grantCredit(requestID: UInt64, events: Int) {
        channel.send(.credit(requestID: requestID, events: UInt32(events)))
    }

    func generationEnded(requestID: UInt64, expired: Bool) {
        let alive = state.withLock { state -> Bool in
            state.streams.removeValue(forKey: requestID)
            return state.alive
        }
        if expired && alive {
            kill(reason: "the watchdog cut request \(requestID) off (silent, or ignoring its cancel)")
        }
    }

    func countInputTokens(document: [UInt8]) throws(AFMError) -> Int? {
        guard case .success(let reply) = send(timeout: .seconds(30), { .tokenize(seq: $0, request: document) }) else { return nil }
        if reply.status == AFM_ERR_BUSY {
            // The runner's tokenizer pool is full (RunnerService.tokenizerThreads/tokenizerWaiting).
            throw AFMError(.busy, "The backend '\(backendID)' is counting tokens for too many requests; retry later.", retryAfterSeconds: 1)
        }
        guard reply.status == AFM_OK else { return nil }
        // A runner's count is untrusted like a backend's: capped by the same rule (negative: no count).
        return BackendUsage.count(abiValue: reply.value)
    }

    /// `destroy` (unless abandoned), then `shutdown`; `SIGTERM` after 5 s, `SIGKILL` 5 s later.
    func retire(abandoned: Bool) {
        let alive = state.withLock { state -> Bool in
            state.expectingExit = true
            return state.alive
        }
        guard alive else { return }
        if !abandoned {
            _ = send(timeout: .seconds(30)) { .destroy(seq: $0) }
        }
        channel.send(.shutdown)
        if exited.wait(timeout: .now() + 5) == .timedOut {
            logger.warning("backend runner did not exit after shutdown; sending SIGTERM")
            signalUnlessReaped { $0.terminate() }
            if exited.wait(timeout: .now() + 5) == .timedOut {
                logger.warning("backend runner ignored SIGTERM; sending SIGKILL")
                signalUnlessReaped { $0.killImmediately() }
                exited.wait()
            }
        }
        exited.signal()
    }

    /// Asks the runner to exit at once, without `destroy` (its owner is gone); an expected exit, not a crash.
    func endWithoutDestroy() {
        state.withLock { $0.expectingExit = true }
        channel.send(.shutdown)
    }

    /// Signals the runner unless it is (about to be) reaped; the waiter thread reaps only after setting `reaped`
    /// under the same lock.
    private func signalUnlessReaped(_ send: (ChildProcess) -> Void) {
        state.withLock { state in
            if !state.reaped { send(child) }
        }
    }
}
