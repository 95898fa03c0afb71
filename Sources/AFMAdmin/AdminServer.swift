// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMLogging
import AFMSystem
import Synchronization

/// The admin socket server: varlink over a Unix stream socket, interface `org.afm.Admin`.
///
/// ```
/// accept thread (epoll: listener + wake eventfd)
///     └─ per connection: one dedicated thread
///          read ─► VarlinkFramer ─► Task { AdminDispatcher.run → AdminHandler } ─► ReplyOutbox ─► write
/// ```
/// Calls on one connection run one at a time, replies strictly in order (varlink has no multiplexing).
/// Blocking reads and writes happen only on the dedicated threads; handlers run as tasks. The peer level
/// comes from `SO_PEERCRED` (+ `SO_PEERGROUPS`) once per connection. A malformed call gets an error reply and
/// the connection stays usable; a frame over the limit gets `org.afm.Admin.FrameTooLarge` and is closed.
///
/// Idle connections cannot hold the slots that `afmctl reload` (`ExecReload`, the package trigger) needs: one that
/// does not complete a call within ``Configuration/idleTimeoutMilliseconds`` (sends nothing, or half a message) is
/// closed; one user id may hold at most ``Configuration/maxConnectionsPerUser`` of the
/// ``Configuration/maxConnections`` shared slots; and each admin uid (root, the daemon's user) has
/// ``Configuration/reservedAdminConnections`` slots of its own beyond both caps, which no other uid can take. So a
/// flood from the daemon's own user (a compromised runner, whose WatchCounters streams the idle timeout does not
/// end) cannot refuse root's `systemctl reload` (the unit's `ExecReload=+` runs afmctl as root).
public final class AdminServer: Sendable {
    /// Where and how to serve.
    public struct Configuration: Sendable {
        /// The socket path (`/run/afm/admin.sock`).
        public var socketPath: String
        /// The socket file's mode (default `0o660`: owner and group may connect).
        public var mode: UInt32 = 0o660
        /// A group to own the socket file (the `afm` group), or `nil` for the daemon's group.
        public var group: UInt32?
        /// Who gets which level.
        public var policy: AdminAccessPolicy
        /// Shared slots: connections beyond this are answered with `TooManyConnections` and closed (default 64);
        /// admin uids may also use their ``reservedAdminConnections``.
        public var maxConnections = 64
        /// Slots of each admin uid beyond ``maxConnections`` and ``maxConnectionsPerUser`` (default 8), used when
        /// those are taken: floods from other users, or from another admin uid, cannot refuse `systemctl reload`.
        public var reservedAdminConnections = 8
        /// Shared slots one user id may hold at once, whatever its level (default 32, half of them): one user, or a
        /// compromised backend running as the daemon's user, cannot take every slot.
        public var maxConnectionsPerUser = 32
        /// A connection that does not complete a call within this time (after it opened, or after its previous
        /// call ended) is closed (default 10 s). Calls that stream (`WatchCounters`) are not limited by it.
        public var idleTimeoutMilliseconds = 10_000
        /// The largest call accepted, in bytes (default 1 MiB).
        public var maxFrameBytes = 1 << 20
        /// A client that does not read its replies for this long is disconnected (default 10 s).
        public var sendTimeoutMilliseconds = 10_000
        /// The `org.varlink.service.GetInfo` reply.
        public var info = AdminDispatcher.ServiceInfo()

        /// Creates a configuration with the defaults above.
        public init(socketPath: String, policy: AdminAccessPolicy) {
            self.socketPath = socketPath
            self.policy = policy
        }
    }

    private struct Connection {
        var descriptor: GuardedDescriptor
        var uid: UInt32
        /// Whether it holds one of its admin uid's reserved slots rather than a shared one.
        var reserved = false
        var task: Task<Void, Never>?
        var outbox: ReplyOutbox?
    }

    private struct State {
        var listener: FileDescriptor?
        var acceptThread: IOThread?
        var connections: [UInt64: Connection] = [:]
        var nextID: UInt64 = 1
        var stopping = false
    }

    /// The configuration in use.
    public let configuration: Configuration
    private let dispatcher: AdminDispatcher
    private let logger: Logger
    private let state = Mutex(State())
    private let wake: EventFD

    /// Creates a server; nothing is bound until ``start()``.
    public init(configuration: Configuration, handler: any AdminHandler, logger: Logger) throws(SystemCallError) {
        self.configuration = configuration
        self.dispatcher = AdminDispatcher(handler: handler, info: configuration.info)
        self.logger = logger
        self.wake = try EventFD()
    }

    /// Binds the socket (creating its directory, removing a stale socket, refusing a live one) and starts
    /// accepting connections.
    ///
    /// - Throws: ``UnixListenerError`` (in use by another daemon, not a socket, or a system error).
    public func start() throws(UnixListenerError) {
        let path = configuration.socketPath
        if let slash = path.lastIndex(of: "/"), slash != path.startIndex {
            do {
                try AtomicFile.makeDirectories(String(path[..<slash]), mode: 0o755)
            } catch {
                throw .system(path: path, error)
            }
        }
        let listener = try FileDescriptor.makeUnixListener(path: path, mode: configuration.mode, group: configuration.group)
        do {
            try listener.setNonBlocking(true)
            let epoll = try Epoll()
            try epoll.add(listener, events: .readable, userData: 1)
            try epoll.add(wake.descriptor, events: .readable, userData: 2)
            let thread = try IOThread.spawn(name: "afm-admin") { [self] in acceptLoop(listener: listener, epoll: epoll) }
            state.withLock {
                $0.listener = listener
                $0.acceptThread = thread
            }
        } catch {
            listener.close()
            removeFileIfPresent(path)
            throw .system(path: path, error)
        }
        logger.info("admin socket listening", ["path": path, "mode": String(configuration.mode, radix: 8)])
    }

    /// Stops accepting, closes every connection (cancelling calls in progress), removes the socket file, and
    /// waits (up to 3 s) for the connection threads to end.
    public func stop() async {
        let (listener, thread, connections) = state.withLock { state in
            state.stopping = true
            defer {
                state.listener = nil
                state.acceptThread = nil
            }
            return (state.listener, state.acceptThread, Array(state.connections.values))
        }
        if let thread {
            wake.signal()
            await onDedicatedThread("afm-admin-stop") { thread.join() }
        }
        if let listener {
            listener.close()
            removeFileIfPresent(configuration.socketPath)
        }
        for connection in connections {
            connection.descriptor.interrupt()
            connection.task?.cancel()
            connection.outbox?.finish()
        }
        for _ in 0..<300 where connectionCount > 0 {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// The number of open client connections.
    public var connectionCount: Int { state.withLock { $0.connections.count } }

    // MARK: - Accepting

    private func acceptLoop(listener: FileDescriptor, epoll: Epoll) {
        var events = EpollEventBuffer(capacity: 4)
        while true {
            let count: Int
            do {
                count = try epoll.wait(into: &events, timeoutMilliseconds: -1)
            } catch {
                logger.error("admin socket: \(error)")
                return
            }
            for index in 0..<count where events.userData(at: index) == 2 { return }
            acceptPending(listener)
        }
    }

    private func acceptPending(_ listener: FileDescriptor) {
        while true {
            let accepted: AcceptedSocket
            do {
                guard case .processed(let socket) = try listener.accept() else { return }
                accepted = socket
            } catch {
                logger.warning("admin socket: accept failed: \(error)")
                return
            }
            let fd = accepted.descriptor
            let guarded = GuardedDescriptor(fd)
            // SO_PEERCRED never blocks: who connected decides which slots the connection may take.
            guard let uid = try? fd.peerCredentials().uid else {
                fd.close()
                continue
            }
            let admission = state.withLock { admit(uid: uid, descriptor: guarded, &$0) }
            guard case .accepted(let id) = admission else {
                if case .refused(let error) = admission {
                    logger.debug("admin socket: connection refused: too many connections", ["uid": String(uid)])
                    // The socket is fresh and non-blocking: the short reply fits its send buffer.
                    try? fd.writeAll(VarlinkFramer.encode(error.reply))
                }
                fd.close()
                continue
            }
            do {
                let thread = try IOThread.spawn(name: "afm-admin-\(id)") { [self] in serve(guarded, id: id) }
                thread.detach()
            } catch {
                logger.warning("admin socket: cannot start a connection thread: \(error)")
                _ = state.withLock { $0.connections.removeValue(forKey: id) }
                guarded.close()
            }
        }
    }

    private enum Admission {
        case accepted(UInt64)
        case refused(AdminError)
    }

    /// Takes a shared slot (under both caps), else one of an admin uid's own reserved slots, else refuses naming
    /// the cap that applied. Runs once per accepted connection, under the state lock.
    private func admit(uid: UInt32, descriptor: GuardedDescriptor, _ state: inout State) -> Admission {
        let admin = configuration.policy.adminUserIDs.contains(uid)
        let reserve = admin ? configuration.reservedAdminConnections : 0
        var shared = 0
        var mine = 0
        var mineReserved = 0
        for connection in state.connections.values {
            if connection.reserved {
                if connection.uid == uid { mineReserved += 1 }
            } else {
                shared += 1
                if connection.uid == uid { mine += 1 }
            }
        }
        let reserved: Bool
        if state.stopping {
            return .refused(.tooManyConnections(limit: configuration.maxConnections))
        } else if shared < configuration.maxConnections && mine < configuration.maxConnectionsPerUser {
            reserved = false
        } else if mineReserved < reserve {
            reserved = true
        } else if mine >= configuration.maxConnectionsPerUser {
            return .refused(.tooManyConnections(limit: configuration.maxConnectionsPerUser + reserve, perUser: true))
        } else {
            return .refused(.tooManyConnections(limit: configuration.maxConnections + reserve))
        }
        defer { state.nextID += 1 }
        state.connections[state.nextID] = Connection(descriptor: descriptor, uid: uid, reserved: reserved)
        return .accepted(state.nextID)
    }

    // MARK: - One connection

    private func serve(_ guarded: GuardedDescriptor, id: UInt64) {
        let fd = guarded.descriptor
        defer {
            _ = state.withLock { $0.connections.removeValue(forKey: id) }
            guarded.close()
        }
        let credentials: PeerCredentials
        do {
            credentials = try fd.peerCredentials()
            try fd.setNonBlocking(false)
            try fd.setSendTimeout(milliseconds: configuration.sendTimeoutMilliseconds)
        } catch {
            logger.warning("admin socket: cannot read peer credentials: \(error)")
            return
        }
        let level = configuration.policy.level(for: credentials, groups: fd.peerGroups())
        logger.debug("admin connection", ["peer": credentials.description, "level": level.description])
        var framer = VarlinkFramer(limit: configuration.maxFrameBytes)
        let idle = UInt64(max(configuration.idleTimeoutMilliseconds, 1)) * 1_000_000
        var deadline = SystemClock.monotonicNanoseconds() + idle
        while true {
            switch framer.next() {
            case .message(let frame):
                guard run(frame, on: fd, id: id, credentials: credentials, level: level) else { return }
                deadline = SystemClock.monotonicNanoseconds() + idle
            case .tooLarge:
                try? fd.writeAll(VarlinkFramer.encode(AdminError.frameTooLarge(limit: configuration.maxFrameBytes).reply))
                return
            case nil:
                // The deadline covers the whole message, so a peer dribbling a byte now and then is closed too.
                let now = SystemClock.monotonicNanoseconds()
                let remaining = deadline > now ? Int32(clamping: (deadline - now + 999_999) / 1_000_000) : 0
                guard remaining > 0, (try? fd.poll(readable: true, writable: false, timeoutMilliseconds: remaining))?.readable == true
                else {
                    logger.debug("admin connection closed: no complete call in time", ["peer": credentials.description])
                    return
                }
                guard let bytes = try? fd.readSome(), !bytes.isEmpty else { return }
                framer.append(bytes)
            }
        }
    }

    /// Runs one call and writes its replies; `false` when the connection is finished.
    private func run(
        _ frame: [UInt8], on fd: FileDescriptor, id: UInt64, credentials: PeerCredentials, level: AdminLevel
    ) -> Bool {
        let outbox = ReplyOutbox()
        let dispatcher = self.dispatcher
        let task = Task {
            await dispatcher.run(frame: frame, credentials: credentials, level: level) { reply in
                outbox.push(VarlinkFramer.encode(reply))
            }
            outbox.finish()
        }
        let open = state.withLock { state -> Bool in
            state.connections[id]?.task = task
            state.connections[id]?.outbox = outbox
            return !state.stopping
        }
        if !open { outbox.finish() }
        defer {
            state.withLock { state in
                state.connections[id]?.task = nil
                state.connections[id]?.outbox = nil
            }
        }
        while let bytes = outbox.next() {
            do {
                try fd.writeAll(bytes)
            } catch {
                task.cancel()
                outbox.finish()
                return false
            }
        }
        return open
    }
}
