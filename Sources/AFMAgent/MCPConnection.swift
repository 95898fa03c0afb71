// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import Foundation
import Synchronization

/// JSON-RPC 2.0 with one MCP server over its standard streams: one message per line (newline-delimited, no
/// `Content-Length` headers), requests matched to responses by id, notifications handed to a handler.
///
/// ```
///  request() ─► outbox ─► writer thread ─► child's stdin          (blocking writes never on the cooperative pool)
///  child's stdout/stderr ─► reader thread ─► responses (by id) ─► the waiting request
///                                          └► notifications ─► handler; server requests ─► ping {} / −32601
///  EOF on stdout (the server died) ─► every waiting request fails at once, later ones too: never a hang
///  close() / stop(): stdin closed ─► 2 s ─► SIGTERM ─► 2 s ─► SIGKILL, then reaped; the threads end with it
/// ```
///
/// The outbox is bounded (``maximumOutboxBytes``, counting what waits and what is being written): a server that
/// stops reading its input blocks the writer, and calls made then fail at once with `busy` instead of queueing
/// without end. The threads hold the connection until the server is stopped: ``MCPServer`` stops it when it is
/// dropped.
final class MCPConnection: Sendable {
    /// The longest line accepted from the server (a larger one is a protocol error that closes the connection).
    static let maximumLineBytes = 16 << 20
    /// How much of the server's standard error is kept for error messages.
    static let stderrTailBytes = 2048
    /// The most bytes of messages that may wait for the server to read them (16 MiB, as a line it may send).
    static let maximumOutboxBytes = 16 << 20
    /// The most reads of 64 KiB of the server's stderr at the end of its stdout, before its exit reason is built.
    static let stderrReadsAtEndOfOutput = 16

    private struct State {
        var nextID = 0
        var pending: [Int: CheckedContinuation<JSONValue, any Error>] = [:]
        var timers: [Int: Task<Void, Never>] = [:]
        /// Why no more requests can be answered (set once).
        var closedReason: String?
        var outbox: [[UInt8]] = []
        /// The bytes in ``outbox`` plus those the writer took and has not written yet.
        var outboxBytes = 0
        var closingInput = false
        var stderrTail: [UInt8] = []
        var exit: ChildExitStatus?
        var notificationHandler: (@Sendable (String, JSONValue?) -> Void)?
    }

    let name: String
    private let process: ChildProcess
    private let streams: ChildProcess.StandardStreams
    private let state = Mutex(State())
    private let writerWake: EventFD
    private let readerWake: EventFD

    /// Starts the server process and the reader and writer threads.
    init(configuration: MCPServerConfiguration) throws(AgentError) {
        name = configuration.name
        var environment = ProcessInfo.processInfo.environment
        for (key, value) in configuration.environment { environment[key] = value }
        do {
            writerWake = try EventFD()
            readerWake = try EventFD()
            (process, streams) = try ChildProcess.spawn(
                command: configuration.command, arguments: configuration.arguments,
                environment: environment.map { "\($0.key)=\($0.value)" }.sorted(), directory: configuration.directory)
        } catch {
            throw AgentError(.toolFailed, "MCP server \(configuration.name): cannot start \(configuration.command): \(error)")
        }
        do {
            try IOThread.spawn(name: "afm-mcp-read") { [self] in readLoop() }.detach()
            try IOThread.spawn(name: "afm-mcp-write") { [self] in writeLoop() }.detach()
        } catch {
            process.killImmediately()
            _ = process.wait()
            throw AgentError(.toolFailed, "MCP server \(configuration.name): cannot start a thread: \(error)")
        }
    }

    /// The server's process id.
    var processID: Int32 { process.pid }

    /// Receives the server's notifications (`notifications/tools/list_changed`, …).
    func setNotificationHandler(_ handler: @escaping @Sendable (String, JSONValue?) -> Void) {
        state.withLock { $0.notificationHandler = handler }
    }

    /// Sends a request and waits for its result; the server's JSON-RPC error, its death, the timeout and task
    /// cancellation fail it.
    func request(_ method: String, params: JSONValue?, timeout: Duration) async throws(AgentError) -> JSONValue {
        let id = state.withLock { state in
            state.nextID += 1
            return state.nextID
        }
        var message: JSONObject = ["jsonrpc": "2.0", "id": .number(JSONNumber(id)), "method": .string(method)]
        if let params { message["params"] = params }
        let bytes = JSONValue.object(message).encoded() + [0x0A]
        do {
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSONValue, any Error>) in
                    let refusal: AgentError? = state.withLock { state in
                        if let reason = state.closedReason { return AgentError(.toolFailed, reason) }
                        // Cancelled before the request was registered: the cancellation handler has run (or is
                        // about to, finding nothing), so the request is refused here rather than sent and waited on.
                        if Task.isCancelled { return AgentError.cancelled }
                        // A server that does not read its input would otherwise make the outbox grow without end.
                        guard state.outboxBytes + bytes.count <= Self.maximumOutboxBytes else {
                            return AgentError(
                                .busy,
                                "MCP server \(name) is not reading its input: \(state.outboxBytes) bytes wait for it and this "
                                    + "request has \(bytes.count) (limit \(Self.maximumOutboxBytes)); \(method) was not sent")
                        }
                        state.pending[id] = continuation
                        state.outbox.append(bytes)
                        state.outboxBytes += bytes.count
                        return nil
                    }
                    if let refusal {
                        continuation.resume(throwing: refusal)
                        return
                    }
                    writerWake.signal()
                    // A strong capture, bounded by the request: `finish` and `fail` cancel the timer, and a cancelled
                    // timer returns at once. (A weak one gave the connection a side table, which LeakSanitizer reports
                    // as a leak when `afm agent` exits with the connection alive: it cannot read the table's address
                    // in the object's reference count.)
                    let timer = Task { [self, name] in
                        guard (try? await Task.sleep(for: timeout)) != nil else { return }
                        let problem = AgentError(.toolFailed, "MCP server \(name) did not answer \(method) within \(ToolRuntime.seconds(timeout))")
                        // The MCP lifecycle: a request that timed out is cancelled, so the server stops working on it.
                        if finish(id: id, with: .failure(problem)) { cancelOnServer(id: id, method: method) }
                    }
                    let resolved = state.withLock { state in
                        guard state.pending[id] != nil else { return true }
                        state.timers[id] = timer
                        return false
                    }
                    if resolved { timer.cancel() }
                }
            } onCancel: {
                // Only a request that was sent (registered) is cancelled on the server; one cancelled before it was
                // registered is never sent, and the server must not hear of an id it never saw.
                if finish(id: id, with: .failure(AgentError.cancelled)) { cancelOnServer(id: id, method: method) }
            }
        } catch let error as AgentError {
            throw error
        } catch {
            throw AgentError(.toolFailed, "MCP server \(name): \(error)")
        }
    }

    /// Tells the server to stop working on a request that was sent and is no longer waited for
    /// (`notifications/cancelled`); never for `initialize`, which the MCP lifecycle forbids cancelling.
    private func cancelOnServer(id: Int, method: String) {
        guard method != "initialize" else { return }
        notify("notifications/cancelled", params: ["requestId": .number(JSONNumber(id)), "reason": "cancelled"])
    }

    /// Sends a notification (no answer expected).
    func notify(_ method: String, params: JSONValue? = nil) {
        var message: JSONObject = ["jsonrpc": "2.0", "method": .string(method)]
        if let params { message["params"] = params }
        send(JSONValue.object(message))
    }

    private func send(_ message: JSONValue) {
        let bytes = message.encoded() + [0x0A]
        let queued = state.withLock { state in
            // Over the bound a notification or an answer to the server is dropped: the server is not reading.
            guard state.closedReason == nil, state.outboxBytes + bytes.count <= Self.maximumOutboxBytes else { return false }
            state.outbox.append(bytes)
            state.outboxBytes += bytes.count
            return true
        }
        if queued { writerWake.signal() }
    }

    /// Stops the server: its input closed, then `SIGTERM`, then `SIGKILL`, each after `grace`; then reaped.
    /// Waiting requests fail. Returns how the server ended.
    @discardableResult
    func close(grace: Duration = .seconds(2)) async -> ChildExitStatus? {
        await withCheckedContinuation { (continuation: CheckedContinuation<ChildExitStatus?, Never>) in
            stop(grace: grace) { continuation.resume(returning: $0) }
        }
    }

    /// Stops the server as ``close(grace:)`` does, without waiting: `done` gets how it ended, on the thread that
    /// stopped it. When the server is gone, both threads end and release the connection (and its descriptors).
    func stop(grace: Duration = .seconds(2), done: @escaping @Sendable (ChildExitStatus?) -> Void = { _ in }) {
        fail(reason: "the MCP server \(name) was shut down", closingInput: true)
        do {
            try IOThread.spawn(name: "afm-mcp-stop") { [self] in
                // Reaped already (an earlier stop): the status is kept, and no signal goes to a pid that may be reused.
                var status = waitForExit(within: grace)
                if status == nil {
                    process.terminate()
                    status = waitForExit(within: grace)
                }
                if status == nil {
                    process.killImmediately()
                    status = waitForExit(within: .seconds(60))
                }
                readerWake.signal()
                done(status)
            }.detach()
        } catch {
            process.killImmediately()
            readerWake.signal()
            done(nil)
        }
    }

    /// The last lines the server wrote to its standard error.
    var stderrTail: String {
        String(decoding: state.withLock { $0.stderrTail }, as: UTF8.self)
    }

    // MARK: - Completion

    /// Completes a waiting request; false when it was not waiting (never registered, or completed already).
    @discardableResult
    private func finish(id: Int, with result: Result<JSONValue, AgentError>) -> Bool {
        let (continuation, timer) = state.withLock { state in
            (state.pending.removeValue(forKey: id), state.timers.removeValue(forKey: id))
        }
        timer?.cancel()
        guard let continuation else { return false }
        continuation.resume(with: result.mapError { $0 as any Error })
        return true
    }

    /// Fails every waiting request and refuses later ones with `reason` (the first reason wins).
    private func fail(reason: String, closingInput: Bool = false) {
        let (waiting, timers, message) = state.withLock { state in
            if state.closedReason == nil { state.closedReason = reason }
            if closingInput { state.closingInput = true }
            defer {
                state.pending = [:]
                state.timers = [:]
            }
            return (Array(state.pending.values), Array(state.timers.values), state.closedReason ?? reason)
        }
        writerWake.signal()
        for timer in timers { timer.cancel() }
        for continuation in waiting { continuation.resume(throwing: AgentError(.toolFailed, message)) }
    }

    // MARK: - Threads

    /// Reaps the child once (whoever comes first keeps the status).
    private func reap() -> ChildExitStatus? {
        state.withLock { state in
            if let exit = state.exit { return exit }
            state.exit = process.reapIfExited()
            return state.exit
        }
    }

    private func waitForExit(within duration: Duration) -> ChildExitStatus? {
        let deadline = ContinuousClock.now + duration
        while true {
            if let status = reap() { return status }
            if ContinuousClock.now >= deadline { return nil }
            usleep(10_000)
        }
    }

    private func writeLoop() {
        while true {
            let (batch, closing) = state.withLock { state in
                defer { state.outbox = [] }
                return (state.outbox, state.closingInput)
            }
            for message in batch {
                do {
                    try streams.input.writeAllToPipe(message)
                    state.withLock { $0.outboxBytes -= message.count }
                } catch {
                    fail(reason: "MCP server \(name) stopped reading its input (\(error))")
                    break
                }
            }
            if closing {
                streams.input.close()
                return
            }
            _ = try? PollSet.waitReadable([writerWake.descriptor], timeoutMilliseconds: -1)
            writerWake.drain()
        }
    }

    private func readLoop() {
        var line: [UInt8] = []
        var outputOpen = true
        var errorOpen = true
        var buffer = [UInt8](repeating: 0, count: 65_536)
        defer {
            streams.output.close()
            streams.error.close()
        }
        while outputOpen || errorOpen {
            var watched = [readerWake.descriptor]
            if outputOpen { watched.append(streams.output) }
            if errorOpen { watched.append(streams.error) }
            guard let ready = try? PollSet.waitReadable(watched, timeoutMilliseconds: -1) else { return }
            if ready.contains(readerWake.descriptor) { return }
            if outputOpen && ready.contains(streams.output) {
                let count = read(streams.output, into: &buffer)
                if count == 0 {
                    outputOpen = false
                    // What the server wrote to stderr before it exited is in that pipe by now: read it first, so
                    // its last words are in the reason (when both ends were ready in one round, this read the
                    // stdout end first and the reason lacked them: MCPServerTests under ThreadSanitizer).
                    // Only what is there now (the pipe blocks: a child of the server may hold its stderr open
                    // long after the server is gone), and a bounded number of reads (a writer may keep it full).
                    var reads = 0
                    while errorOpen, reads < Self.stderrReadsAtEndOfOutput,
                        (try? PollSet.waitReadable([streams.error], timeoutMilliseconds: 0))?.contains(streams.error) == true
                    {
                        let count = read(streams.error, into: &buffer)
                        guard count != 0 else {
                            errorOpen = false
                            break
                        }
                        guard count > 0 else { break }
                        keepStderr(buffer[0..<count])
                        reads += 1
                    }
                    serverClosedOutput()
                    // `ready` is stale now (the stderr end may have been drained): poll again, wake-up included.
                    continue
                } else if count > 0 {
                    for byte in buffer[0..<count] {
                        if byte == 0x0A {
                            handle(line: line)
                            line.removeAll(keepingCapacity: true)
                        } else {
                            line.append(byte)
                        }
                    }
                    if line.count > Self.maximumLineBytes {
                        fail(reason: "MCP server \(name) sent a line over \(Self.maximumLineBytes) bytes")
                        line = []
                    }
                }
            }
            if errorOpen && ready.contains(streams.error) {
                let count = read(streams.error, into: &buffer)
                if count == 0 {
                    errorOpen = false
                } else if count > 0 {
                    keepStderr(buffer[0..<count])
                }
            }
        }
    }

    /// Appends to the stderr tail, keeping its last ``stderrTailBytes``.
    private func keepStderr(_ bytes: ArraySlice<UInt8>) {
        state.withLock { state in
            state.stderrTail += bytes
            if state.stderrTail.count > Self.stderrTailBytes {
                state.stderrTail.removeFirst(state.stderrTail.count - Self.stderrTailBytes)
            }
        }
    }

    /// Reads what is there: the byte count, 0 at end of file or on an error (both end the stream), -1 for
    /// nothing yet.
    private func read(_ descriptor: FileDescriptor, into buffer: inout [UInt8]) -> Int {
        switch try? buffer.withUnsafeMutableBytes({ try descriptor.read(into: $0) }) {
        case .processed(let count)?: count
        case .wouldBlock?: -1
        case nil: 0
        }
    }

    /// The server's stdout ended: it exited or is about to; every request fails now.
    private func serverClosedOutput() {
        let status = waitForExit(within: .milliseconds(200))
        let tail = stderrTail.split(separator: "\n").suffix(3).joined(separator: " | ")
        var reason = "MCP server \(name) exited"
        reason += status.map { " (\($0))" } ?? " (closed its output)"
        if !tail.isEmpty { reason += ": \(tail)" }
        fail(reason: reason)
    }

    private func handle(line: [UInt8]) {
        guard line.contains(where: { $0 != 0x20 && $0 != 0x0D && $0 != 0x09 }) else { return }
        guard let message = try? JSONParser.parse(line) else { return }  // not JSON-RPC (a stray print): ignored
        if let method = message["method"]?.stringValue {
            if let id = message["id"], !id.isNull {
                // A request from the server: only ping is answered; this client offers no other capability.
                if method == "ping" {
                    send(["jsonrpc": "2.0", "id": id, "result": [:]])
                } else {
                    send(["jsonrpc": "2.0", "id": id, "error": ["code": -32601, "message": .string("method not found: \(method)")]])
                }
            } else {
                let handler = state.withLock { $0.notificationHandler }
                handler?(method, message["params"])
            }
            return
        }
        guard let id = message["id"]?.numberValue?.intValue else { return }
        if let error = message["error"] {
            let code = error["code"]?.numberValue?.intValue ?? 0
            let text = error["message"]?.stringValue ?? "error"
            finish(id: id, with: .failure(AgentError(.toolFailed, "MCP server \(name): \(text) (JSON-RPC \(code))")))
        } else {
            finish(id: id, with: .success(message["result"] ?? .null))
        }
    }
}
