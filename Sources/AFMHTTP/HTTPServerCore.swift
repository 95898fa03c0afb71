// SPDX-License-Identifier: Apache-2.0

import AFMLogging
import AFMSystem
import Synchronization

/// What one running instance of a server shares between its loops and connections.
///
/// A new core is made by every `start()`, so a restarted server never mixes with the previous run's loops.
final class HTTPServerCore: Sendable {
    /// Timeouts converted to monotonic nanoseconds once.
    struct Timeouts: Sendable {
        var requestHeader: UInt64
        var send: UInt64
        var linger: UInt64
    }

    let configuration: HTTPServer.Configuration
    let logger: Logger
    let starter: HTTPStartingHandler
    let limits: HTTPRequestParser.Limits
    let timeouts: Timeouts
    /// The processing deadline and its grace: the server's, which may change while it serves.
    let deadlines: HTTPProcessingDeadlines
    let dateCache = HTTPDateCache()
    let loops: [HTTPEventLoop]
    private let nextID = Atomic<UInt64>(0)
    private let nextLoop = Atomic<Int>(0)
    private let draining = Atomic<Bool>(false)
    private let registry = Mutex<[UInt64: HTTPConnection]>([:])
    private let refusedCount = Atomic<Int>(0)

    init(
        configuration: HTTPServer.Configuration, deadlines: HTTPProcessingDeadlines, logger: Logger,
        starter: @escaping HTTPStartingHandler
    ) throws(SystemCallError) {
        self.configuration = configuration
        self.logger = logger
        self.starter = starter
        limits = HTTPRequestParser.Limits(
            maxHeaderBytes: configuration.maxHeaderBytes, maxBodyBytes: configuration.maxBodyBytes,
            maxHeaderFields: configuration.maxHeaderFields)
        timeouts = Timeouts(
            requestHeader: SystemClock.nanoseconds(configuration.requestHeaderTimeout),
            send: SystemClock.nanoseconds(configuration.sendTimeout),
            linger: SystemClock.nanoseconds(configuration.lingerTimeout))
        self.deadlines = deadlines
        var loops: [HTTPEventLoop] = []
        for index in 0..<max(1, configuration.ioThreadCount) {
            loops.append(try HTTPEventLoop(index: index))
        }
        self.loops = loops
    }

    /// Whether a graceful shutdown is in progress (new responses say `Connection: close`).
    var isDraining: Bool { draining.load(ordering: .relaxed) }

    func beginDraining() { draining.store(true, ordering: .relaxed) }

    /// Creates and registers a connection, assigning it to a loop round-robin.
    func makeConnection(descriptor: FileDescriptor, remoteAddress: String) -> HTTPConnection {
        let id = nextID.add(1, ordering: .relaxed).newValue
        let loopIndex = nextLoop.add(1, ordering: .relaxed).newValue % loops.count
        let connection = HTTPConnection(
            id: id, descriptor: descriptor, remoteAddress: remoteAddress, core: self, loop: loops[loopIndex])
        registry.withLock { $0[id] = connection }
        return connection
    }

    func unregister(_ connection: HTTPConnection) {
        _ = registry.withLock { $0.removeValue(forKey: connection.id) }
    }

    var connectionCount: Int { registry.withLock { $0.count } }

    /// Connections refused over `maxConnections` since the server started.
    var refusedConnections: Int { refusedCount.load(ordering: .relaxed) }

    func countRefusal() { refusedCount.add(1, ordering: .relaxed) }

    /// Every registered connection (a snapshot).
    var connections: [HTTPConnection] { registry.withLock { Array($0.values) } }
}
