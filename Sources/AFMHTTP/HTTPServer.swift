// SPDX-License-Identifier: Apache-2.0

import AFMLogging
import AFMSystem
import Synchronization

/// An HTTP/1.1 server on non-blocking sockets and epoll, running each request's handler: its synchronous start
/// (``HTTPStartingHandler``), and the rest, if any, in its own task.
///
/// ```
///  accept (loop 0) ──► loop N: read ─► parse (limits) ─► start(request, writer) ─► answered (no task)
///                                                          └─► Task { rest() }
///                                                                │ respond / startStream / write
///  loop N: end of pass / EPOLLOUT flush ◄── queue ◄──────────────┘ (direct send from other threads)
///  client EOF/RST ─► loop N ─► cancel the handler task      timeouts: ~100 ms sweep on each loop
/// ```
///
/// - A small request's handler (body ≤ 64 KiB) starts on the loop's thread; its rest runs as a task on
///   `HandlerExecutor`, starting there too until it first waits, and a task resumed by a thread that grants
///   `InlineResumption` continues on that thread; everything else runs on libdispatch's pool. Handlers call
///   ``HTTPResponseWriter/leaveEventLoop()`` before anything that may block.
/// - Output written on a loop thread is sent at the end of the loop's pass (`HTTPDeferredFlush`).
///
/// - Keep-alive (HTTP/1.1 default, `Connection: close` honoured, HTTP/1.0 only with `keep-alive`) and
///   pipelining: the next request is parsed only after the current handler returned, so answers keep order, and
///   only while at most the high watermark of answers is queued, so a client that pipelines without reading holds
///   up its own connection instead of filling the server's memory (reading resumes below the low watermark).
/// - Bodies are read fully before the handler runs (`Content-Length` or chunked); `Expect: 100-continue`
///   gets `100 Continue` when the declared size is acceptable, 413 at once when not.
/// - Every error the server answers itself uses the JSON envelope of ``HTTPErrorBody``, unless
///   ``Configuration/errorBody`` renders another for the request's path (the daemon's per-dialect envelopes).
/// - A client disconnect (EOF, reset, `EPOLLRDHUP`) cancels the running handler at once. A client that
///   half-closes after sending its request is treated as gone too: the gateway cancels work for clients
///   that left, and no HTTP client in use half-closes.
public final class HTTPServer: Sendable {
    private struct State {
        var core: HTTPServerCore?
        var starting = false
        var listener: FileDescriptor?
        var listenerShutDown = false
        /// The listener was passed in (``start(adopting:name:)``): another process (systemd) holds it too.
        var listenerAdopted = false
        var localPort: Int?
    }

    private let configuration: Configuration
    /// The processing deadline and grace in force (``setProcessingDeadline(_:grace:)``), shared with every start.
    private let deadlines: HTTPProcessingDeadlines
    private let logger: Logger
    private let starter: HTTPStartingHandler
    private let state = Mutex(State())

    /// Creates a server whose handler runs as a task for every request; nothing is bound until
    /// ``start(host:port:)``.
    public convenience init(configuration: Configuration = .init(), logger: Logger, handler: @escaping HTTPHandler) {
        self.init(configuration: configuration, logger: logger, starter: { request, writer in
            .continueAsync { await handler(request, writer) }
        })
    }

    /// Creates a server whose handler first tries to answer synchronously (``HTTPStartingHandler``); nothing is
    /// bound until ``start(host:port:)``.
    public init(configuration: Configuration = .init(), logger: Logger, starter: @escaping HTTPStartingHandler) {
        precondition(
            configuration.outboundLowWatermark <= configuration.outboundHighWatermark,
            "the low watermark must not exceed the high watermark")
        self.configuration = configuration
        deadlines = HTTPProcessingDeadlines(deadline: configuration.processingDeadline, grace: configuration.processingDeadlineGrace)
        self.logger = logger
        self.starter = starter
    }

    /// Changes ``Configuration/processingDeadline`` and ``Configuration/processingDeadlineGrace`` while the server
    /// runs (and for its later starts): requests already running are judged by the new values from the loops' next
    /// sweep (about 100 ms). A daemon's reload calls it.
    public func setProcessingDeadline(_ deadline: Duration, grace: Duration) {
        deadlines.set(deadline: deadline, grace: grace)
    }

    deinit { stopListening() }

    /// Binds and starts serving. Returns the bound port (useful with port 0).
    ///
    /// `host` is an IPv4 or IPv6 literal or `localhost` (127.0.0.1).
    /// - Throws: ``HTTPServerError``, for example "cannot listen on 127.0.0.1:11535: Address already in use".
    @discardableResult
    public func start(host: String, port: Int) throws -> Int {
        try start(name: "\(host):\(port)") { () throws(HTTPServerError) -> (FileDescriptor, Int?) in
            guard let address = SocketAddress(host: host, port: port) else {
                throw .invalidAddress(host: host, port: port)
            }
            let listener: FileDescriptor
            do throws(SystemCallError) {
                listener = try FileDescriptor.makeTCPListener(address: address)
            } catch {
                throw .cannotListen(host: host, port: port, reason: "\(error.errno)")
            }
            do throws(SystemCallError) {
                return (listener, try listener.localAddress().port)
            } catch {
                listener.close()
                throw .cannotListen(host: host, port: port, reason: "\(error.errno)")
            }
        } ?? port
    }

    /// Binds a Unix stream socket at `path` with permission bits `mode` and starts serving on it.
    ///
    /// A stale socket file (nothing accepts on it) is replaced; a live one or a file that is not a socket is left
    /// alone and refused.
    /// - Throws: ``HTTPServerError``.
    public func start(unixPath path: String, mode: UInt32) throws {
        _ = try start(name: "unix:\(path)") { () throws(HTTPServerError) -> (FileDescriptor, Int?) in
            do throws(UnixListenerError) {
                let listener = try FileDescriptor.makeUnixListener(path: path, mode: mode)
                try? listener.setNonBlocking(true)
                return (listener, nil)
            } catch {
                throw .cannotListen(socket: path, reason: error.description)
            }
        }
    }

    /// Starts serving on a listening socket made by someone else: systemd's socket activation (`LISTEN_FDS`).
    /// The server owns the descriptor from now on and closes it when it stops, but never shuts the socket down:
    /// that would stop it listening for systemd too. Returns the bound port for TCP, nil for a Unix socket.
    /// - Throws: ``HTTPServerError``.
    @discardableResult
    public func start(adopting listener: FileDescriptor, name: String) throws -> Int? {
        try start(name: name, adopted: true) { () throws(HTTPServerError) -> (FileDescriptor, Int?) in
            try? listener.setNonBlocking(true)
            return (listener, try? listener.localAddress().port)
        }
    }

    private func start(
        name: String, adopted: Bool = false, makeListener: () throws(HTTPServerError) -> (FileDescriptor, Int?)
    ) throws -> Int? {
        try state.withLock { (state) throws(HTTPServerError) in
            guard state.core == nil, !state.starting else { throw .alreadyRunning }
            state.starting = true
        }
        do {
            let (listener, boundPort) = try makeListener()
            let core = try makeRunningCore(listener: listener, adopted: adopted)
            state.withLock { state in
                state.core = core
                state.listener = listener
                state.listenerShutDown = false
                state.listenerAdopted = adopted
                state.localPort = boundPort
                state.starting = false
            }
            logger.info("HTTP server listening", ["address": name, "port": boundPort.map(String.init) ?? "-"])
            return boundPort
        } catch {
            state.withLock { $0.starting = false }
            throw error
        }
    }

    private func makeRunningCore(listener: FileDescriptor, adopted: Bool) throws(HTTPServerError) -> HTTPServerCore {
        let core: HTTPServerCore
        do {
            core = try HTTPServerCore(configuration: configuration, deadlines: deadlines, logger: logger, starter: starter)
        } catch {
            listener.close()
            throw .startFailed("\(error)")
        }
        for (index, loop) in core.loops.enumerated() {
            do {
                try loop.start(core: core, listener: index == 0 ? listener : nil)
            } catch {
                for started in core.loops[..<index] { started.post(.stop) }
                // Loop 0 owns the listener once started and closes it on `.stop`; shutdown only hurries that,
                // and must not touch an adopted socket (see ``stopAccepting()``).
                if index == 0 { listener.close() } else if !adopted { listener.shutdown(.both) }
                throw .startFailed("\(error)")
            }
        }
        return core
    }

    /// The bound port while running, else `nil`.
    public var localPort: Int? { state.withLock { $0.core == nil ? nil : $0.localPort } }

    /// Connections currently open (including ones finishing their last response).
    public var activeConnectionCount: Int {
        state.withLock { $0.core }?.connectionCount ?? 0
    }

    /// Connections answered 503 `busy` because `maxConnections` were open, since the server started.
    public var refusedConnectionCount: Int {
        state.withLock { $0.core }?.refusedConnections ?? 0
    }

    /// Stops accepting: new connection attempts are refused from now on. Idempotent.
    private func stopAccepting() {
        // The listener descriptor stays open until loop 0 ends (after `.stop`), so shutting it down here can
        // never hit a reused descriptor number. Shutdown makes the kernel refuse new connections at once.
        let (listener, adopted, core) = state.withLock { state -> (FileDescriptor?, Bool, HTTPServerCore?) in
            guard !state.listenerShutDown, let listener = state.listener else { return (nil, false, nil) }
            state.listenerShutDown = true
            return (listener, state.listenerAdopted, state.core)
        }
        guard let listener else { return }
        if adopted {
            // shutdown() would end the listening state of the socket itself, which systemd holds too: afmd.socket
            // would then refuse every connection until systemd is restarted. Closing our descriptor leaves it
            // listening, and connections wait in its queue for the next afmd.
            core?.loops.first?.post(.closeListener)
        } else {
            listener.shutdown(.both)
        }
    }

    /// Closes the listening socket and every accepted socket at once; running handler tasks are cancelled.
    ///
    /// Clients see end-of-file immediately and new connections are refused when this returns (on an adopted
    /// socket they wait in its queue instead: its other holder keeps it listening). The event threads finish
    /// asynchronously. The server can be started again with ``start(host:port:)``.
    public func stopListening() {
        stopAccepting()
        let core = state.withLock { state -> HTTPServerCore? in
            let core = state.core
            state.core = nil
            state.listener = nil
            return core
        }
        guard let core else { return }
        for connection in core.connections { connection.abort() }
        for loop in core.loops { loop.post(.stop) }
        logger.info("HTTP server stopped")
    }

    /// Shuts down gracefully: stops accepting, lets in-flight requests finish (keep-alive connections close
    /// after their current response, idle ones at once), waits up to `deadline`, then closes everything as
    /// ``stopListening()`` does. Returns when done.
    public func shutdown(deadline: Duration) async {
        guard let core = state.withLock({ $0.core }) else { return }
        stopAccepting()
        core.beginDraining()
        for loop in core.loops { loop.post(.drain) }
        let clock = ContinuousClock()
        let end = clock.now.advanced(by: deadline)
        while clock.now < end {
            if core.connections.allSatisfy(\.isSettled) { break }
            do {
                try await Task.sleep(for: .milliseconds(10))
            } catch {
                break  // Cancelled: escalate to closing everything now.
            }
        }
        stopListening()
    }
}
