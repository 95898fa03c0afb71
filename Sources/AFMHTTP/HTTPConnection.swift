// SPDX-License-Identifier: Apache-2.0

import AFMSystem
import Synchronization

/// The shared, thread-safe half of one accepted connection: output, the request cycle and the descriptor's
/// lifetime.
///
/// Three kinds of thread touch a connection: its event loop (reads, parses, starts handlers, flushes on
/// `EPOLLOUT`, enforces timeouts), handler tasks (write responses directly, without a hop to the loop), and
/// whoever stops the server. All of them go through the `Mutex<State>`; system calls happen outside it.
///
/// ```
///            beginRequest            handlerFinished (keep-alive)
///   idle ───────────────► handling ─────────────────────────────► idle …
///    │                       │ handlerFinished (close) / 408 / 4xx / 504
///    │                       ▼
///    └──────────────► closing: flush, shutdown(SHUT_WR), linger ──► closed (teardown by the loop)
/// ```
///
/// Descriptor safety: a descriptor number is reused by the kernel as soon as it is closed, so a thread that
/// writes while another closes could write into a stranger's socket. The state therefore counts users
/// (`descriptorUsers`): the loop holds one reference for the whole registration, a writer or an aborting
/// thread takes one around each system call, and whoever drops the count to zero after teardown closes it.
///
/// Write token: at most one thread sends at a time (`writerActive`); others append to the queue, which the
/// token holder drains before letting go. This keeps bytes in lock order without copying them. Because the
/// socket is registered edge-triggered for `EPOLLOUT`, a writer that hits `EAGAIN` rechecks `writableEpoch`
/// (bumped by the loop on every `EPOLLOUT`) so an edge that arrived during its attempt is not lost.
final class HTTPConnection: Sendable {
    /// The server-unique connection id (also the epoll user data).
    let id: UInt64
    let descriptor: FileDescriptor
    /// The peer, `127.0.0.1:54321`.
    let remoteAddress: String
    let core: HTTPServerCore
    /// The loop that owns this connection's registration and reads.
    let loop: HTTPEventLoop
    private let state: Mutex<State>

    enum Phase: Equatable {
        /// Waiting for (or reading) the next request; the loop owns the input.
        case idle
        /// A handler task runs for request `sequence`.
        case handling
    }

    enum ResponseState: Equatable {
        case notStarted
        case streaming(framing: HTTPResponseEncoder.Framing, headOnly: Bool)
        case complete
        /// The server answered instead of the handler (504 after the processing deadline).
        case takenOver
    }

    struct Waiter {
        var id: UInt64
        var continuation: CheckedContinuation<Bool, Never>
    }

    struct State {
        // Descriptor lifetime.
        var descriptorUsers = 1
        var teardownRequested = false
        var descriptorClosed = false
        /// No more output or handler work: the peer is gone or the server closed the connection.
        var closed = false

        // Output.
        var queue = HTTPOutputQueue()
        var writerActive = false
        var writableEpoch: UInt64 = 0
        var closeAfterFlush = false
        var writeShutdown = false
        var lastProgress: UInt64 = 0
        var peakQueued = 0
        var waiters: [Waiter] = []
        var nextWaiterID: UInt64 = 0

        // Request cycle.
        var phase = Phase.idle
        var sequence: UInt64 = 0
        var handlerTask: Task<Void, Never>?
        var response = ResponseState.notStarted
        var keepAlive = true
        var inputWaiting = false
        /// The processing deadline cancelled the handler after its stream had started (``DeadlineAction/grace``).
        var deadlinePassed = false
        /// The loop holds the next request back until the queue drains below the low watermark (``InputStatus/backlogged``).
        var outputWaiting = false
        var idleSince: UInt64 = 0

        /// Takes one descriptor reference if the descriptor is still open.
        mutating func retainDescriptor() -> Bool {
            guard !descriptorClosed else { return false }
            descriptorUsers += 1
            return true
        }

        /// Drops one descriptor reference; returns true when the caller must now close the descriptor.
        mutating func releaseDescriptor() -> Bool {
            descriptorUsers -= 1
            precondition(descriptorUsers >= 0, "descriptor reference count went negative")
            if descriptorUsers == 0 && teardownRequested && !descriptorClosed {
                descriptorClosed = true
                return true
            }
            return false
        }

        /// Marks the connection dead; returns what must be cancelled and woken outside the lock.
        mutating func markClosed() -> (Task<Void, Never>?, [Waiter]) {
            closed = true
            queue.removeAll()
            let task = handlerTask
            handlerTask = nil
            let waiting = waiters
            waiters = []
            return (task, waiting)
        }
    }

    init(id: UInt64, descriptor: FileDescriptor, remoteAddress: String, core: HTTPServerCore, loop: HTTPEventLoop) {
        self.id = id
        self.descriptor = descriptor
        self.remoteAddress = remoteAddress
        self.core = core
        self.loop = loop
        var initial = State()
        initial.idleSince = SystemClock.coarseMonotonicNanoseconds()
        initial.lastProgress = initial.idleSince
        self.state = Mutex(initial)
    }

    // MARK: - Request cycle (event loop side)

    /// Enters the handling phase for request `sequence`; false when the connection is already closed.
    func beginRequest(sequence: UInt64, keepAlive: Bool) -> Bool {
        let draining = core.isDraining
        return state.withLock { state in
            guard !state.closed, !state.closeAfterFlush else { return false }
            state.phase = .handling
            state.sequence = sequence
            state.response = .notStarted
            state.keepAlive = keepAlive && !draining
            state.inputWaiting = false
            state.deadlinePassed = false
            return true
        }
    }

    /// Stores the handler task of request `sequence` so that it can be cancelled.
    func attach(_ task: Task<Void, Never>, sequence: UInt64) {
        let cancelNow = state.withLock { state -> Bool in
            if state.closed { return true }
            if state.phase == .handling && state.sequence == sequence { state.handlerTask = task }
            return false
        }
        if cancelNow { task.cancel() }
    }

    /// What the loop sees when it wants to read or parse more input.
    enum InputStatus: Equatable {
        /// Request `sequence`'s handler still runs; the loop must hold further input.
        case busy
        /// Ready for the next request; the previous one finished at `since`.
        case idle(since: UInt64)
        /// The previous request finished, but more than the high watermark of output is still queued: the loop must
        /// neither parse nor read the next request until the client reads it down (the flush that gets the queue
        /// below the low watermark posts `.wake`). Pipelined requests from a client that does not read would
        /// otherwise queue their answers without bound, as streams would without ``waitForDrain()``.
        case backlogged
        /// The connection is closing after its last response; input is discarded.
        case closing
        /// The connection is dead.
        case closed
    }

    /// Checks the request cycle; with `markInputWaiting`, asks `handlerFinished` to wake the loop when busy. A
    /// ``InputStatus/backlogged`` answer always arranges for a wake once the queue drained.
    func inputStatus(markInputWaiting: Bool) -> InputStatus {
        let highWatermark = core.configuration.outboundHighWatermark
        return state.withLock { state in
            if state.closed { return .closed }
            if state.closeAfterFlush { return .closing }
            if state.phase == .handling {
                if markInputWaiting { state.inputWaiting = true }
                return .busy
            }
            if state.queue.byteCount > highWatermark {
                state.outputWaiting = true
                return .backlogged
            }
            return .idle(since: state.idleSince)
        }
    }

    /// Called by the handler task when the handler returns: completes or repairs the response and moves on.
    ///
    /// A handler that returned without responding gets a 500 (the connection then closes), its body rendered for
    /// the request's `path` by ``HTTPServer/Configuration/errorBody`` like every error the server raises itself; one
    /// that left a stream unfinished has its connection closed without the last chunk, so the client sees a
    /// truncated body rather than a complete-looking one.
    func handlerFinished(sequence: UInt64, isHead: Bool, path: String?) {
        var fallback: [UInt8]?
        let needsFallback = state.withLock { state in
            state.phase == .handling && state.sequence == sequence && state.response == .notStarted && !state.closed
        }
        if needsFallback {
            let message = "The server failed to produce a response."
            fallback = HTTPResponseEncoder.errorResponse(
                status: 500, code: "internal", message: message, date: core.dateCache.current(),
                serverName: core.configuration.serverName, headOnly: isHead,
                body: core.configuration.errorBody?(path, 500, "internal", message))
            core.logger.warning("handler returned without a response", ["connection.id": "\(id)"])
        }
        let draining = core.isDraining
        let now = SystemClock.coarseMonotonicNanoseconds()
        let (flush, wakeLoop) = state.withLock { state -> (Bool, Bool) in
            guard state.phase == .handling, state.sequence == sequence else { return (false, false) }
            state.handlerTask = nil
            state.phase = .idle
            state.idleSince = now
            switch state.response {
            case .notStarted:
                if let fallback, !state.closed { state.queue.append(fallback) }
                state.keepAlive = false
            case .streaming, .takenOver:
                state.keepAlive = false
            case .complete:
                break
            }
            state.response = .complete
            if draining { state.keepAlive = false }
            if !state.keepAlive { state.closeAfterFlush = true }
            let wake = state.inputWaiting || !state.keepAlive
            state.inputWaiting = false
            guard !state.closed else { return (false, false) }
            return (takeTokenIfWorkPending(&state), wake)
        }
        if flush { flushAsTokenHolder() }
        if wakeLoop { loop.post(.wake(id)) }
    }

    /// What the loop does after ``processingDeadlineExpired(sequence:path:grace:)``.
    enum DeadlineAction: Equatable {
        /// Nothing more: the 504 is queued (or the request had already ended).
        case answered
        /// The stream had started: its handler, cancelled, may still end it until the grace period is over.
        case grace
        /// The stream had started and no grace is allowed: tear the connection down now.
        case closeNow
    }

    /// The processing deadline passed for request `sequence`: cancel the handler and answer 504 if nothing was
    /// sent yet. A handler whose stream already started is cancelled too, but may still write (its protocol's
    /// final error event, see ``isProcessingDeadlinePassed(sequence:)``) and end the stream: with `grace`, the
    /// connection stays until the handler returns or the loop's grace period ends; the connection closes after the
    /// response either way.
    func processingDeadlineExpired(sequence: UInt64, path: String?, grace: Bool) -> DeadlineAction {
        let message = "The request took too long to process."
        let response = HTTPResponseEncoder.errorResponse(
            status: 504, code: "timeout", message: message, date: core.dateCache.current(),
            serverName: core.configuration.serverName, body: core.configuration.errorBody?(path, 504, "timeout", message))
        let (task, waiters, flush, action) = state.withLock {
            state -> (Task<Void, Never>?, [Waiter], Bool, DeadlineAction) in
            guard state.phase == .handling, state.sequence == sequence, !state.closed else {
                return (nil, [], false, .answered)
            }
            if state.response == .notStarted {
                state.response = .takenOver
                state.keepAlive = false
                state.closeAfterFlush = true
                state.queue.append(response)
                let task = state.handlerTask
                return (task, [], takeTokenIfWorkPending(&state), .answered)
            }
            if grace {
                state.deadlinePassed = true
                state.keepAlive = false
                return (state.handlerTask, [], false, .grace)
            }
            let (task, waiters) = state.markClosed()
            return (task, waiters, false, .closeNow)
        }
        task?.cancel()
        for waiter in waiters { waiter.continuation.resume(returning: false) }
        if flush { flushAsTokenHolder() }
        return action
    }

    /// Whether request `sequence`'s handler was cancelled by the processing deadline (rather than by the client
    /// leaving): its stream may still be ended properly.
    func isProcessingDeadlinePassed(sequence: UInt64) -> Bool {
        state.withLock { $0.sequence == sequence && $0.deadlinePassed }
    }

    /// Sends the `100 Continue` interim response.
    func sendContinue() {
        _ = try? output(HTTPResponseEncoder.continueResponse) { _ throws(HTTPWriteError) in }
    }

    /// Sends one of the server's own error responses while idle, then closes after flushing.
    func sendErrorAndClose(_ bytes: [UInt8]) {
        _ = try? output(bytes) { (state) throws(HTTPWriteError) in
            state.keepAlive = false
            state.closeAfterFlush = true
        }
    }

    /// The loop's view of a closing connection (for lingering and send timeouts).
    func outputStatus() -> (queued: Int, lastProgress: UInt64, writeShutdown: Bool, closeAfterFlush: Bool) {
        state.withLock { ($0.queue.byteCount, $0.lastProgress, $0.writeShutdown, $0.closeAfterFlush) }
    }

    /// Whether a graceful shutdown may stop waiting for this connection (closed, or its last response is out).
    var isSettled: Bool {
        state.withLock {
            $0.closed || $0.writeShutdown || ($0.phase == .idle && !$0.closeAfterFlush && $0.queue.isEmpty)
        }
    }

    // MARK: - Closing

    /// The loop is done with the connection: mark it closed, drop the loop's descriptor reference, cancel
    /// the handler and fail pending writers. Called exactly once, on the loop.
    func teardown() {
        let (task, waiters, closeDescriptor) = state.withLock { state -> (Task<Void, Never>?, [Waiter], Bool) in
            let (task, waiters) = state.markClosed()
            state.teardownRequested = true
            return (task, waiters, state.releaseDescriptor())
        }
        task?.cancel()
        for waiter in waiters { waiter.continuation.resume(returning: false) }
        if closeDescriptor { descriptor.close() }
    }

    /// Closes the connection from any thread: the peer sees end-of-file at once, the handler is cancelled, and
    /// the loop (woken by the resulting `EPOLLHUP`) tears it down.
    func abort() {
        let (task, waiters, holding) = state.withLock { state -> (Task<Void, Never>?, [Waiter], Bool) in
            let (task, waiters) = state.markClosed()
            return (task, waiters, state.retainDescriptor())
        }
        task?.cancel()
        for waiter in waiters { waiter.continuation.resume(returning: false) }
        guard holding else { return }
        descriptor.shutdown(.both)
        releaseDescriptorReference()
    }

    private func releaseDescriptorReference() {
        if state.withLock({ $0.releaseDescriptor() }) { descriptor.close() }
    }

    // MARK: - Output

    /// Queues `bytes` after everything queued before, then sends what the socket accepts now.
    ///
    /// `transition` runs under the lock first; it validates and updates the response state, and throwing
    /// from it queues nothing. Returns whether more than the high watermark is still queued afterwards.
    @discardableResult
    func output(
        _ first: [UInt8],
        _ second: [UInt8] = [],
        _ third: [UInt8] = [],
        transition: (inout State) throws(HTTPWriteError) -> Void
    ) throws(HTTPWriteError) -> Bool {
        let highWatermark = core.configuration.outboundHighWatermark
        let (flush, queued) = try state.withLock { (state) throws(HTTPWriteError) -> (Bool, Int) in
            guard !state.closed else { throw .connectionClosed }
            try transition(&state)
            state.queue.append(first)
            state.queue.append(second)
            state.queue.append(third)
            state.peakQueued = max(state.peakQueued, state.queue.byteCount)
            return (takeTokenIfWorkPending(&state), state.queue.byteCount)
        }
        if flush {
            if queued <= highWatermark, let deferred = HTTPDeferredFlush.slot.current {
                deferred.add(self)
                return false
            }
            flushAsTokenHolder()
        }
        return state.withLock { $0.queue.byteCount > highWatermark && !$0.closed }
    }

    /// Takes the write token when there is something to send (or a pending shutdown) and nobody holds it.
    private func takeTokenIfWorkPending(_ state: inout State) -> Bool {
        guard !state.writerActive, !state.closed else { return false }
        guard !state.queue.isEmpty || (state.closeAfterFlush && !state.writeShutdown) else { return false }
        guard state.retainDescriptor() else { return false }
        state.writerActive = true
        return true
    }

    /// The loop saw `EPOLLOUT`: record the edge and flush if a writer had parked on `EAGAIN`.
    func writableEvent() {
        let flush = state.withLock { state -> Bool in
            state.writableEpoch &+= 1
            return takeTokenIfWorkPending(&state)
        }
        if flush { flushAsTokenHolder() }
    }

    /// Sends what `output` left for the end of the loop's pass (`HTTPDeferredFlush`); the token and descriptor
    /// reference taken then are released here.
    func flushDeferred() {
        flushAsTokenHolder()
    }

    private enum FlushStep {
        case write((chunks: ArraySlice<[UInt8]>, offset: Int), epoch: UInt64)
        case shutdownWrite
        case stop(closeDescriptor: Bool, wake: [Waiter], wakeLoop: Bool)
    }

    /// Sends queued bytes until the queue is empty or the socket is full; the caller holds the write token
    /// and one descriptor reference, both released here.
    private func flushAsTokenHolder() {
        let lowWatermark = core.configuration.outboundLowWatermark
        while true {
            let step = state.withLock { state -> FlushStep in
                if state.closed {
                    state.writerActive = false
                    return .stop(closeDescriptor: state.releaseDescriptor(), wake: [], wakeLoop: false)
                }
                if state.queue.isEmpty {
                    if state.closeAfterFlush && !state.writeShutdown {
                        state.writeShutdown = true
                        return .shutdownWrite
                    }
                    state.writerActive = false
                    let wake = takeWaitersIfDrained(&state, lowWatermark: lowWatermark)
                    let wakeLoop = takeOutputWaitingIfDrained(&state, lowWatermark: lowWatermark)
                    return .stop(closeDescriptor: state.releaseDescriptor(), wake: wake, wakeLoop: wakeLoop)
                }
                return .write(state.queue.snapshot(), epoch: state.writableEpoch)
            }
            switch step {
            case .stop(let closeDescriptor, let wake, let wakeLoop):
                for waiter in wake { waiter.continuation.resume(returning: true) }
                if wakeLoop { loop.post(.wake(id)) }
                if closeDescriptor { descriptor.close() }
                return
            case .shutdownWrite:
                // The response is complete: send FIN after it, keep reading (lingering) so that unread
                // request bytes cannot turn our close into a reset that destroys the response in flight.
                descriptor.shutdown(.write)
                continue
            case .write(let snapshot, let epoch):
                let result = HTTPOutputQueue.write(snapshot, to: descriptor)
                let now = SystemClock.coarseMonotonicNanoseconds()
                enum After {
                    case again
                    case parked(closeDescriptor: Bool)
                    case failed
                }
                var wake: [Waiter] = []
                var wakeLoop = false
                let after = state.withLock { state -> After in
                    switch result {
                    case .success(.processed(let written)):
                        if !state.closed { state.queue.consume(written) }
                        state.lastProgress = now
                        wake = takeWaitersIfDrained(&state, lowWatermark: lowWatermark)
                        wakeLoop = takeOutputWaitingIfDrained(&state, lowWatermark: lowWatermark)
                        return .again
                    case .success(.wouldBlock):
                        if state.writableEpoch != epoch { return .again }
                        state.writerActive = false
                        return .parked(closeDescriptor: state.releaseDescriptor())
                    case .failure:
                        state.writerActive = false
                        return .failed
                    }
                }
                for waiter in wake { waiter.continuation.resume(returning: true) }
                if wakeLoop { loop.post(.wake(id)) }
                switch after {
                case .again:
                    continue
                case .parked(let closeDescriptor):
                    if closeDescriptor { descriptor.close() }
                    return
                case .failed:
                    // EPIPE/ECONNRESET: the peer is gone. Aborting (while still holding our reference) also
                    // guarantees the loop an EPOLLHUP when the failure was only visible to this writer.
                    abort()
                    releaseDescriptorReference()
                    return
                }
            }
        }
    }

    /// Whether the loop held the next request back (``InputStatus/backlogged``) and may go on now; the wait for
    /// that request then counts from here, not from the end of the previous one.
    private func takeOutputWaitingIfDrained(_ state: inout State, lowWatermark: Int) -> Bool {
        guard state.outputWaiting, !state.closed, state.queue.byteCount < lowWatermark else { return false }
        state.outputWaiting = false
        state.idleSince = SystemClock.coarseMonotonicNanoseconds()
        return true
    }

    private func takeWaitersIfDrained(_ state: inout State, lowWatermark: Int) -> [Waiter] {
        guard !state.waiters.isEmpty, state.queue.byteCount < lowWatermark else { return [] }
        let waiters = state.waiters
        state.waiters = []
        return waiters
    }

    /// Suspends until the queue drains below the low watermark; false when the connection closed (or the
    /// task was cancelled) instead.
    func waitForDrain() async -> Bool {
        let lowWatermark = core.configuration.outboundLowWatermark
        let id = state.withLock { state -> UInt64 in
            state.nextWaiterID &+= 1
            return state.nextWaiterID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let immediate = state.withLock { state -> Bool? in
                    if state.closed { return false }
                    if state.queue.byteCount < lowWatermark { return true }
                    state.waiters.append(Waiter(id: id, continuation: continuation))
                    return nil
                }
                if let immediate {
                    continuation.resume(returning: immediate)
                } else if Task.isCancelled {
                    // Cancelled before the waiter was registered: onCancel found nothing to resume.
                    resumeWaiter(id: id, with: false)
                }
            }
        } onCancel: {
            resumeWaiter(id: id, with: false)
        }
    }

    private func resumeWaiter(id: UInt64, with value: Bool) {
        let waiter = state.withLock { state -> Waiter? in
            guard let index = state.waiters.firstIndex(where: { $0.id == id }) else { return nil }
            return state.waiters.remove(at: index)
        }
        waiter?.continuation.resume(returning: value)
    }

    // MARK: - Response API (handler side)

    /// Checks that request `sequence` may still produce output.
    private static func checkCurrent(_ state: State, sequence: UInt64) throws(HTTPWriteError) {
        if state.closed { throw .connectionClosed }
        guard state.sequence == sequence, state.phase == .handling else {
            throw .invalidState("the handler for this request has already returned")
        }
        if state.response == .takenOver { throw .connectionClosed }
    }

    private func connectionField(keepAlive: Bool, version: HTTPVersion) -> HTTPResponseEncoder.ConnectionField {
        if !keepAlive { return .close }
        return version.minor == 0 ? .keepAlive : .omit
    }

    /// Sends a complete response for request `sequence`.
    func respond(
        sequence: UInt64, version: HTTPVersion, isHead: Bool, head: HTTPResponseHead, body: [UInt8]
    ) throws(HTTPWriteError) {
        let date = core.dateCache.current()
        let serverName = core.configuration.serverName
        let wantsClose = HTTPResponseEncoder.requestsClose(head.headers)
        let noBody = head.status == 204 || head.status == 304
        // Small bodies are copied behind the head so the response leaves in one `send`; large ones are
        // queued as their own array and go out with the head in one `sendmsg`, without a copy.
        let small = body.count <= 16 * 1024
        let sendsBody = !isHead && !noBody
        try output(sendsBody && !small ? body : []) { (state) throws(HTTPWriteError) in
            try Self.checkCurrent(state, sequence: sequence)
            guard state.response == .notStarted else { throw .invalidState("a response was already started") }
            if wantsClose || core.isDraining { state.keepAlive = false }
            var encoded = try HTTPResponseEncoder.encodeHead(
                status: head.status, headers: head.headers, framing: noBody ? .none : .length(body.count),
                connection: connectionField(keepAlive: state.keepAlive, version: version), date: date,
                serverName: serverName, reservingBody: sendsBody && small ? body.count : 0)
            if sendsBody && small { encoded.append(contentsOf: body) }
            state.response = .complete
            state.queue.append(encoded)
        }
    }

    /// Sends the head of a streamed response for request `sequence`.
    func startStream(sequence: UInt64, version: HTTPVersion, isHead: Bool, head: HTTPResponseHead)
        throws(HTTPWriteError)
    {
        let date = core.dateCache.current()
        let serverName = core.configuration.serverName
        let wantsClose = HTTPResponseEncoder.requestsClose(head.headers)
        let noBody = head.status == 204 || head.status == 304
        try output([]) { (state) throws(HTTPWriteError) in
            try Self.checkCurrent(state, sequence: sequence)
            guard state.response == .notStarted else { throw .invalidState("a response was already started") }
            if wantsClose || core.isDraining { state.keepAlive = false }
            let framing: HTTPResponseEncoder.Framing
            if noBody {
                framing = .none
            } else if version.minor >= 1 {
                framing = .chunked
            } else {
                // HTTP/1.0 has no chunked coding: the body ends when the connection closes.
                framing = .closeDelimited
                state.keepAlive = false
            }
            let encoded = try HTTPResponseEncoder.encodeHead(
                status: head.status, headers: head.headers, framing: framing,
                connection: connectionField(keepAlive: state.keepAlive, version: version), date: date,
                serverName: serverName)
            state.response = .streaming(framing: framing, headOnly: isHead || noBody)
            state.queue.append(encoded)
        }
    }

    /// Queues one piece of a streamed body; returns whether the caller should wait for the queue to drain.
    func writeStreamPiece(sequence: UInt64, _ bytes: [UInt8]) throws(HTTPWriteError) -> Bool {
        let header = bytes.isEmpty ? [] : HTTPResponseEncoder.chunkHeader(size: bytes.count)
        return try output([]) { (state) throws(HTTPWriteError) in
            try Self.checkCurrent(state, sequence: sequence)
            guard case .streaming(let framing, let headOnly) = state.response else {
                throw .invalidState("no stream was started")
            }
            // An empty chunk would end a chunked body, so an empty write sends nothing.
            if headOnly || bytes.isEmpty { return }
            if framing == .chunked {
                state.queue.append(header)
                state.queue.append(bytes)
                state.queue.append(ASCII.crlf)
            } else {
                state.queue.append(bytes)
            }
        }
    }

    /// Ends a streamed body for request `sequence`.
    func finishStream(sequence: UInt64) throws(HTTPWriteError) {
        try output([]) { (state) throws(HTTPWriteError) in
            try Self.checkCurrent(state, sequence: sequence)
            guard case .streaming(let framing, let headOnly) = state.response else {
                throw .invalidState("no stream was started")
            }
            state.response = .complete
            if framing == .chunked && !headOnly { state.queue.append(HTTPResponseEncoder.lastChunk) }
        }
    }

    /// Whether request `sequence` can no longer send anything.
    func isClosed(sequence: UInt64) -> Bool {
        state.withLock { state in
            state.closed || state.sequence != sequence || state.phase != .handling || state.response == .takenOver
        }
    }

    /// Bytes queued in user space and not yet accepted by the kernel.
    var queuedByteCount: Int { state.withLock { $0.queue.byteCount } }

    /// The largest ``queuedByteCount`` seen on this connection.
    var peakQueuedByteCount: Int { state.withLock { $0.peakQueued } }
}
