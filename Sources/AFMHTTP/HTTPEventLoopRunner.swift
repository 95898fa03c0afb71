// SPDX-License-Identifier: Apache-2.0

import AFMLogging
import AFMSystem

/// The loop thread's private state: per-connection input contexts, the epoll event buffer and timers.
///
/// Never shared: created on the loop thread and released when it ends, hence not `Sendable`.
final class HTTPEventLoopRunner {
    /// Per-connection input state, owned by the loop thread.
    final class Context {
        let connection: HTTPConnection
        var parser: HTTPRequestParser
        /// Edge-triggered: whether the socket may hold unread bytes.
        var readable = true
        /// A handler was started and the loop has not yet seen it finish.
        var handlerActive = false
        var sequence: UInt64 = 0
        var handlerStartedAt: UInt64 = 0
        var deadlineFired = false
        /// When the processing deadline cancelled a handler whose stream had started; it may end the stream until
        /// `processingDeadlineGrace` later.
        var deadlineGraceSince: UInt64?
        /// Closing: the last response is queued with close-after-flush; input is discarded.
        var closing = false
        var lingerSince: UInt64?
        /// When the wait for the next request began (accept, or the previous response's end).
        var waitingSince: UInt64
        /// When the first byte of the request being received arrived.
        var requestStartedAt: UInt64?
        /// The path of the request whose handler runs (for the body of a 504).
        var requestPath: String?
        var served = 0

        init(connection: HTTPConnection, limits: HTTPRequestParser.Limits, now: UInt64) {
            self.connection = connection
            self.parser = HTTPRequestParser(limits: limits)
            self.waitingSince = now
        }
    }

    private let loop: HTTPEventLoop
    private let core: HTTPServerCore
    private let logger: Logger
    private var listener: FileDescriptor?
    private var acceptPausedUntil: UInt64?
    /// When the connection limit was last logged (one warning per 10 s while it holds).
    private var limitLoggedAt: UInt64?
    private var contexts: [UInt64: Context] = [:]
    private var events = EpollEventBuffer(capacity: 256)
    private let readBuffer: UnsafeMutableRawBufferPointer
    private var running = true
    private var lastSweep: UInt64 = 0
    /// The last sweep stopped at ``maxExpiriesPerSweep``: sweep again right after the next (non-waiting) pass.
    private var sweepUnfinished = false
    /// Output produced on this thread during a pass, sent at its end.
    private let deferredFlush = HTTPDeferredFlush()

    /// While a handler runs, at most this much further (pipelined) input is buffered before reading pauses.
    private static let heldInputLimit = 64 * 1024
    private static let sweepInterval: UInt64 = 100_000_000
    /// A sweep closes at most this many timed-out connections before letting the loop serve I/O again: a thousand
    /// slow clients that connected together expire together, and closing them all in one go would hold up every
    /// other request on this loop for that long.
    private static let maxExpiriesPerSweep = 128
    /// Handlers of requests with at most this many body bytes start on the loop's thread.
    static let inlineStartLimit = 64 * 1024

    init(loop: HTTPEventLoop, core: HTTPServerCore, listener: FileDescriptor?) {
        self.loop = loop
        self.core = core
        self.logger = core.logger
        self.listener = listener
        readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit { readBuffer.deallocate() }

    func run() {
        HTTPDeferredFlush.slot.set(deferredFlush)
        defer {
            deferredFlush.flushAll()  // normally empty: each teardown below flushes first
            HTTPDeferredFlush.slot.set(nil)
        }
        while running {
            let count: Int
            do {
                count = try loop.epoll.wait(into: &events, timeoutMilliseconds: sweepUnfinished ? 0 : 100)
            } catch {
                logger.error("epoll_wait failed; stopping the HTTP event loop", ["error": "\(error)"])
                break
            }
            for index in 0..<count {
                let token = events.userData(at: index)
                let flags = events.events(at: index)
                switch token {
                case HTTPEventLoop.wakeupToken:
                    loop.wakeup.drain()
                    for command in loop.takeCommands() { handle(command) }
                case HTTPEventLoop.listenerToken:
                    acceptConnections()
                default:
                    if let context = contexts[token] { handle(flags, on: context) }
                }
                if !running { break }
            }
            let now = SystemClock.coarseMonotonicNanoseconds()
            if sweepUnfinished || elapsed(from: lastSweep, to: now) >= Self.sweepInterval {
                lastSweep = now
                sweep(now: now)
            }
            deferredFlush.flushAll()
        }
        for context in Array(contexts.values) { teardown(context, "server stopped") }
        if let listener {
            self.listener = nil
            listener.close()
        }
    }

    // MARK: - Commands

    private func handle(_ command: HTTPEventLoop.Command) {
        switch command {
        case .adopt(let connection):
            adopt(connection)
        case .refuse(let connection):
            refuse(connection)
        case .wake(let id):
            guard let context = contexts[id] else { return }
            process(context)
            if context.readable && contexts[id] != nil { readAndProcess(context) }
        case .drain:
            for context in Array(contexts.values) where !context.handlerActive && !context.closing {
                if !context.parser.hasPartialRequest { teardown(context, "drained while idle") }
            }
        case .closeListener:
            if let listener {
                try? loop.epoll.remove(listener)
                self.listener = nil
                listener.close()
            }
        case .stop:
            running = false
        }
    }

    // MARK: - Accepting

    private func acceptConnections() {
        guard let listener else { return }
        let limits = core.configuration
        for _ in 0..<128 {
            let open = core.connectionCount
            if open >= limits.maxConnections + limits.refusalHeadroom {
                // Even refusals would cost descriptors now: leave new connections in the kernel's backlog (which
                // refuses or drops beyond its size) and look again at the next sweep.
                pauseAccepting(listener)
                logConnectionLimit(open: open)
                return
            }
            let accepted: AcceptedSocket
            do {
                switch try listener.accept() {
                case .wouldBlock: return
                case .processed(let socket): accepted = socket
                }
            } catch {
                switch error.errno {
                case .connectionAborted, .protocolError, .notPermitted:
                    continue  // That one connection failed; others may be pending.
                case .tooManyOpenFiles, .tooManyOpenFilesInSystem, .noBufferSpace, .noMemory:
                    // Level-triggered: retrying at once would spin. Pause accepting; the sweep resumes it.
                    logger.warning("accept failed; pausing for 100 ms", ["error": "\(error)"])
                    pauseAccepting(listener)
                    return
                default:
                    // EINVAL: the listener was shut down (stopListening/shutdown). Stop watching it.
                    try? loop.epoll.remove(listener)
                    self.listener = nil
                    listener.close()
                    return
                }
            }
            try? accepted.descriptor.setNoDelay(true)
            let connection = core.makeConnection(
                descriptor: accepted.descriptor, remoteAddress: accepted.peer?.description ?? "unknown")
            let refused = open >= limits.maxConnections
            if refused {
                core.countRefusal()
                logConnectionLimit(open: open)
            }
            if connection.loop === loop {
                if refused { refuse(connection) } else { adopt(connection) }
            } else {
                connection.loop.post(refused ? .refuse(connection) : .adopt(connection))
            }
        }
    }

    /// Stops watching the listener until the next sweep (~100 ms), which adds it back.
    private func pauseAccepting(_ listener: FileDescriptor) {
        try? loop.epoll.remove(listener)
        acceptPausedUntil = SystemClock.coarseMonotonicNanoseconds() + Self.sweepInterval
    }

    private func logConnectionLimit(open: Int) {
        let now = SystemClock.coarseMonotonicNanoseconds()
        if let last = limitLoggedAt, elapsed(from: last, to: now) < 10_000_000_000 { return }
        limitLoggedAt = now
        logger.warning(
            "connection limit reached; refusing new connections with 503",
            ["open": "\(open)", "limit": "\(core.configuration.maxConnections)", "refused": "\(core.refusedConnections)"])
    }

    /// Answers a connection over the limit with 503 `busy` and closes it (after the usual linger, so the answer
    /// is not destroyed by a reset when the client's request arrives after the close).
    private func refuse(_ connection: HTTPConnection) {
        adopt(connection)
        guard let context = contexts[connection.id] else { return }
        let bytes = HTTPResponseEncoder.errorResponse(
            status: 503, code: "busy", message: "The server has too many open connections; retry later.",
            date: core.dateCache.current(), serverName: core.configuration.serverName, retryAfterSeconds: 1)
        context.connection.sendErrorAndClose(bytes)
        context.closing = true
    }

    private func adopt(_ connection: HTTPConnection) {
        guard running else {
            connection.teardown()
            core.unregister(connection)
            return
        }
        let context = Context(connection: connection, limits: core.limits, now: SystemClock.coarseMonotonicNanoseconds())
        do {
            try loop.epoll.add(
                connection.descriptor, events: [.readable, .writable, .readHangup, .edgeTriggered],
                userData: connection.id)
        } catch {
            logger.warning("cannot watch a new connection", ["error": "\(error)"])
            connection.teardown()
            core.unregister(connection)
            return
        }
        contexts[connection.id] = context
        logger.debug("connection opened", ["connection.id": "\(connection.id)", "remote": connection.remoteAddress])
    }

    // MARK: - Events

    private func handle(_ flags: EpollEvents, on context: Context) {
        if flags.contains(.writable) || flags.contains(.error) {
            context.connection.writableEvent()
        }
        if !flags.isDisjoint(with: [.readable, .readHangup, .hangup, .error]) {
            context.readable = true
            readAndProcess(context)
        }
        guard contexts[context.connection.id] != nil else { return }
        if !flags.isDisjoint(with: [.readHangup, .hangup, .error]) {
            // The peer closed or reset (or the server aborted the socket). Whatever was readable has been
            // consumed above; a running handler is cancelled now, which is how clients cancel generations.
            teardown(context, "peer hung up")
        }
    }

    /// Reads until the socket is drained (edge-triggered) or input must be held, and parses what arrived.
    private func readAndProcess(_ context: Context) {
        while context.readable {
            if context.handlerActive && !context.closing {
                switch context.connection.inputStatus(markInputWaiting: false) {
                case .busy:
                    if context.parser.bufferedByteCount >= Self.heldInputLimit {
                        // Stop reading until the handler finishes; it posts `.wake` (set inputWaiting).
                        if context.connection.inputStatus(markInputWaiting: true) == .busy { return }
                        continue
                    }
                case .idle(let since):
                    finishCycle(context, since: since)
                case .backlogged:
                    return  // Read nothing more until the client reads its answers; the drain posts `.wake`.
                case .closing:
                    context.closing = true
                case .closed:
                    teardown(context, "closed while busy")
                    return
                }
            }
            let result: IOResult<Int>
            do {
                result = try context.connection.descriptor.read(into: readBuffer)
            } catch {
                teardown(context, "read failed")  // ECONNRESET and friends: the peer is gone.
                return
            }
            switch result {
            case .wouldBlock:
                context.readable = false
            case .processed(0):
                teardown(context, "end of file")
                return
            case .processed(let count):
                // A short read drained the socket; the next arrival raises a new edge.
                if count < readBuffer.count { context.readable = false }
                if context.closing { continue }  // Lingering: discard.
                if !context.parser.hasPartialRequest && context.requestStartedAt == nil {
                    context.requestStartedAt = SystemClock.coarseMonotonicNanoseconds()
                }
                context.parser.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
                process(context)
                guard contexts[context.connection.id] != nil else { return }
            }
        }
    }

    /// The previous request's cycle ended (handler returned, keep-alive): get ready for the next request.
    private func finishCycle(_ context: Context, since: UInt64) {
        context.handlerActive = false
        context.waitingSince = since
        context.requestStartedAt = context.parser.hasPartialRequest ? since : nil
    }

    /// Parses buffered input into requests while no handler is running. Never reads: callers that may find
    /// more input on the socket call ``readAndProcess(_:)`` afterwards.
    private func process(_ context: Context) {
        while !context.closing {
            if context.handlerActive {
                switch context.connection.inputStatus(markInputWaiting: context.parser.bufferedByteCount > 0) {
                case .busy:
                    return  // Pipelined bytes wait; inputWaiting makes the handler's end wake us.
                case .backlogged:
                    return  // Too many answers unread: the next request waits for the drain's `.wake`.
                case .idle(let since):
                    finishCycle(context, since: since)
                case .closing:
                    context.closing = true
                    return
                case .closed:
                    teardown(context, "closed")
                    return
                }
            }
            switch context.parser.next() {
            case .needMoreData:
                return
            case .expectContinue:
                context.connection.sendContinue()
            case .error(let error):
                logger.debug(
                    "rejecting request", ["connection.id": "\(context.connection.id)", "status": "\(error.status)"])
                sendError(context, status: error.status, code: error.code, message: error.message, path: context.parser.failedPath)
            case .request(let parsed):
                startHandler(context, parsed)
            }
        }
    }

    private func sendError(_ context: Context, status: Int, code: String, message: String, path: String?) {
        let bytes = HTTPResponseEncoder.errorResponse(
            status: status, code: code, message: message, date: core.dateCache.current(),
            serverName: core.configuration.serverName, body: core.configuration.errorBody?(path, status, code, message))
        context.connection.sendErrorAndClose(bytes)
        context.closing = true
    }

    private func startHandler(_ context: Context, _ parsed: HTTPParsedRequest) {
        let connection = context.connection
        context.sequence += 1
        let sequence = context.sequence
        context.requestStartedAt = nil
        guard connection.beginRequest(sequence: sequence, keepAlive: parsed.head.keepAlive) else {
            context.closing = true
            return
        }
        context.handlerActive = true
        context.deadlineFired = false
        context.deadlineGraceSince = nil
        context.handlerStartedAt = SystemClock.coarseMonotonicNanoseconds()
        context.served += 1
        let head = parsed.head
        context.requestPath = head.path
        let path = head.path
        let request = HTTPRequest(
            method: head.method, target: head.target, path: head.path, query: head.query, version: head.version,
            headers: head.headers, body: parsed.body, remoteAddress: connection.remoteAddress,
            connectionID: connection.id)
        let writer = HTTPResponseWriter(
            connection: connection, sequence: sequence, version: head.version, isHead: head.method == "HEAD")
        let starter = core.starter
        // A small request's handler starts right here: its synchronous start answers what needs no waiting (then
        // no task exists at all), and the rest runs as a task that also starts here and runs until it first
        // waits, usually for its backend: a hand-off to a pool thread would cost a wake-up and a context switch
        // per request, more than parsing a small body takes. Large bodies (parsing them would hold up every other
        // connection of this loop) start on the pool. Handlers leave the loop before anything that may block
        // (`HTTPResponseWriter.leaveEventLoop`).
        guard parsed.body.count <= Self.inlineStartLimit else {
            let task = Task(executorPreference: HandlerExecutor.shared) {
                if case .continueAsync(let rest) = starter(request, writer) { await rest() }
                connection.handlerFinished(sequence: sequence, isHead: writer.isHead, path: path)
            }
            connection.attach(task, sequence: sequence)
            return
        }
        switch starter(request, writer) {
        case .answered:
            connection.handlerFinished(sequence: sequence, isHead: writer.isHead, path: path)
        case .continueAsync(let rest):
            let task = InlineResumption.with(permitted: true) {
                Task(executorPreference: HandlerExecutor.shared) {
                    await rest()
                    connection.handlerFinished(sequence: sequence, isHead: writer.isHead, path: path)
                }
            }
            connection.attach(task, sequence: sequence)
        }
    }

    // MARK: - Timers

    private func sweep(now: UInt64) {
        if let paused = acceptPausedUntil, now >= paused, let listener {
            acceptPausedUntil = nil
            try? loop.epoll.add(listener, events: [.readable], userData: HTTPEventLoop.listenerToken)
        }
        let configuration = core.timeouts
        let (processing, processingGrace) = (core.deadlines.deadlineNanoseconds, core.deadlines.graceNanoseconds)
        // One 408 for every connection that expires in this sweep: a crowd of slow clients that connected together
        // expires together, and encoding the same answer a thousand times would hold up everyone else on this loop.
        var timeoutAnswer: [UInt8]?
        var expiries = 0
        sweepUnfinished = false
        for context in Array(contexts.values) {
            if expiries == Self.maxExpiriesPerSweep {
                sweepUnfinished = true
                break
            }
            let connection = context.connection
            if !context.closing && context.handlerActive {
                switch connection.inputStatus(markInputWaiting: false) {
                case .busy:
                    if !context.deadlineFired
                        && elapsed(from: context.handlerStartedAt, to: now) > processing
                    {
                        context.deadlineFired = true
                        logger.warning(
                            "processing deadline passed; cancelling the handler",
                            [
                                "connection.id": "\(connection.id)"
                            ])
                        switch connection.processingDeadlineExpired(
                            sequence: context.sequence, path: context.requestPath, grace: processingGrace > 0)
                        {
                        case .answered:
                            break
                        case .grace:
                            context.deadlineGraceSince = now
                        case .closeNow:
                            teardown(context, "deadline passed mid-response")
                            continue
                        }
                    } else if let since = context.deadlineGraceSince, elapsed(from: since, to: now) > processingGrace {
                        // The cancelled handler did not end its stream in time: cut it (no last chunk).
                        teardown(context, "deadline grace passed mid-response")
                        continue
                    }
                case .idle(let since):
                    finishCycle(context, since: since)
                    process(context)
                    if context.readable && contexts[connection.id] != nil { readAndProcess(context) }
                case .backlogged:
                    break  // A client that stopped reading altogether meets the send timeout below.
                case .closing:
                    context.closing = true
                case .closed:
                    teardown(context, "closed")
                    continue
                }
            }
            guard contexts[connection.id] != nil else { continue }
            let output = connection.outputStatus()
            if output.closeAfterFlush { context.closing = true }
            if output.queued > 0 && elapsed(from: output.lastProgress, to: now) > configuration.send {
                logger.debug("send timeout; closing", ["connection.id": "\(connection.id)"])
                teardown(context, "send timeout")
                continue
            }
            if context.closing {
                if output.writeShutdown {
                    if let since = context.lingerSince {
                        if elapsed(from: since, to: now) > configuration.linger { teardown(context, "linger finished") }
                    } else {
                        context.lingerSince = now
                    }
                }
                continue
            }
            if !context.handlerActive {
                let start = context.requestStartedAt ?? context.waitingSince
                if elapsed(from: start, to: now) > configuration.requestHeader {
                    if context.parser.hasPartialRequest || context.served == 0 {
                        let message = "The request was not received in time."
                        let answer: [UInt8]
                        if let body = core.configuration.errorBody?(context.parser.pendingPath, 408, "request_timeout", message) {
                            // An envelope for the path: not the shared default answer.
                            answer = HTTPResponseEncoder.errorResponse(
                                status: 408, code: "request_timeout", message: message, date: core.dateCache.current(),
                                serverName: core.configuration.serverName, body: body)
                        } else {
                            answer =
                                timeoutAnswer
                                ?? HTTPResponseEncoder.errorResponse(
                                    status: 408, code: "request_timeout", message: message,
                                    date: core.dateCache.current(), serverName: core.configuration.serverName)
                            timeoutAnswer = answer
                        }
                        context.connection.sendErrorAndClose(answer)
                        context.closing = true
                    } else {
                        teardown(context, "idle keep-alive timeout")  // An idle keep-alive connection: close silently.
                    }
                    expiries += 1
                }
            }
        }
    }

    /// Nanoseconds from `start` to `now`, zero when `start` is later: other threads stamp times (last send
    /// progress, end of a response) after the sweep read its clock, and a wrapped difference would look
    /// like an expired timeout.
    private func elapsed(from start: UInt64, to now: UInt64) -> UInt64 {
        now > start ? now - start : 0
    }

    // MARK: - Closing

    private func teardown(_ context: Context, _ reason: StaticString) {
        let connection = context.connection
        guard contexts.removeValue(forKey: connection.id) != nil else { return }
        // An answer this pass queued must leave before the connection closes: a client that sends its request and
        // its FIN together still gets what a handler answered at once.
        deferredFlush.flushAll()
        // Closing the descriptor (here or by the last writer) removes it from the epoll set.
        connection.teardown()
        core.unregister(connection)
        logger.debug("connection closed", ["connection.id": "\(connection.id)", "reason": "\(reason)"])
    }
}
