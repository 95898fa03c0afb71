// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

extension FileDescriptor {
    // MARK: - Creating sockets

    /// Creates a non-blocking, close-on-exec TCP socket listening on `address`.
    ///
    /// Sets `SO_REUSEADDR` so a restarted server can bind while old connections sit in `TIME_WAIT`. Port 0 asks
    /// the kernel for a free port; read it back with ``localAddress()``.
    /// - Throws: `SystemCallError` naming the failing call (`bind` with `EADDRINUSE` when the port is taken).
    /// The corresponding C functions are `socket`, `setsockopt`, `bind` and `listen`.
    public static func makeTCPListener(
        address: SocketAddress,
        backlog: Int32 = SOMAXCONN
    ) throws(SystemCallError) -> FileDescriptor {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let raw = try blockingSystemCall("socket") { socket(address.family, type, 0) }
        let fd = FileDescriptor(rawValue: raw)
        do {
            try fd.setOption(level: SOL_SOCKET, name: SO_REUSEADDR, value: 1)
            _ = try address.withSockAddr { (pointer, length) throws(SystemCallError) -> Int32 in
                try blockingSystemCall("bind") { bind(raw, pointer, length) }
            }
            _ = try blockingSystemCall("listen") { listen(raw, backlog) }
        } catch {
            fd.close()
            throw error
        }
        return fd
    }

    /// Connects a new close-on-exec TCP socket to `address`, waiting for the connection to complete.
    ///
    /// Meant for clients and tests: on loopback the handshake completes inside the call. With `nonBlocking`
    /// the socket is switched to non-blocking mode once connected.
    /// The corresponding C functions are `socket` and `connect`.
    public static func connectTCP(to address: SocketAddress, nonBlocking: Bool = false) throws(SystemCallError)
        -> FileDescriptor
    {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let raw = try blockingSystemCall("socket") { socket(address.family, type, 0) }
        let fd = FileDescriptor(rawValue: raw)
        do {
            _ = try address.withSockAddr { (pointer, length) throws(SystemCallError) -> Int32 in
                try blockingSystemCall("connect") { connect(raw, pointer, length) }
            }
            if nonBlocking { try fd.setNonBlocking(true) }
        } catch {
            fd.close()
            throw error
        }
        return fd
    }

    // MARK: - Using sockets

    /// Accepts one pending connection as a non-blocking, close-on-exec socket.
    ///
    /// Returns ``IOResult/wouldBlock`` when no connection is pending. The corresponding C function is `accept4`
    /// with `SOCK_NONBLOCK | SOCK_CLOEXEC`, so there is no window in which the descriptor could leak into a
    /// child process.
    public func accept() throws(SystemCallError) -> IOResult<AcceptedSocket> {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let flags = Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let result = try withUnsafeMutablePointer(to: &storage) {
            (pointer) throws(SystemCallError) -> IOResult<Int32> in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                (address) throws(SystemCallError) -> IOResult<Int32> in
                try systemCall("accept4") { LinuxSymbols.accept4(rawValue, address, &length, flags) }
            }
        }
        switch result {
        case .wouldBlock: return .wouldBlock
        case .processed(let raw):
            return .processed(
                AcceptedSocket(descriptor: FileDescriptor(rawValue: raw), peer: SocketAddress(storage: storage)))
        }
    }

    /// Shuts down one or both directions without releasing the descriptor number.
    ///
    /// Safe to call while another thread reads or writes the socket (unlike `close`, the number cannot be
    /// reused meanwhile), which makes it the way to interrupt a connection from outside its I/O thread.
    /// `ENOTCONN` (already disconnected) is ignored. The corresponding C function is `shutdown`.
    public func shutdown(_ direction: ShutdownDirection) {
        let how: Int32
        switch direction {
        case .read: how = Int32(SHUT_RD)
        case .write: how = Int32(SHUT_WR)
        case .both: how = Int32(SHUT_RDWR)
        }
        if Glibc.shutdown(rawValue, how) < 0 {
            precondition(errno != EBADF, "shutdown(\(rawValue)): descriptor was not open")
        }
    }

    /// The address this socket is bound to. The corresponding C function is `getsockname`.
    public func localAddress() throws(SystemCallError) -> SocketAddress {
        try address(call: "getsockname") { getsockname($0, $1, $2) }
    }

    /// The address of the connected peer. The corresponding C function is `getpeername`.
    public func peerAddress() throws(SystemCallError) -> SocketAddress {
        try address(call: "getpeername") { getpeername($0, $1, $2) }
    }

    private func address(
        call: StaticString,
        _ body: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32
    ) throws(SystemCallError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = try withUnsafeMutablePointer(to: &storage) { (pointer) throws(SystemCallError) -> Int32 in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                (address) throws(SystemCallError) -> Int32 in
                try blockingSystemCall(call) { body(rawValue, address, &length) }
            }
        }
        guard let address = SocketAddress(storage: storage) else {
            throw SystemCallError(call: "\(call)", errno: .invalidArgument)
        }
        return address
    }

    // MARK: - Socket options

    /// Turns Nagle's algorithm off (`TCP_NODELAY`), so small responses leave immediately instead of waiting
    /// for the previous segment's ACK. The corresponding C function is `setsockopt`.
    public func setNoDelay(_ on: Bool = true) throws(SystemCallError) {
        try setOption(level: Int32(IPPROTO_TCP), name: TCP_NODELAY, value: on ? 1 : 0)
    }

    /// Sets the kernel receive buffer size (`SO_RCVBUF`); the kernel doubles the value for bookkeeping.
    /// The corresponding C function is `setsockopt`.
    public func setReceiveBufferSize(_ bytes: Int) throws(SystemCallError) {
        try setOption(level: SOL_SOCKET, name: SO_RCVBUF, value: Int32(clamping: bytes))
    }

    /// Sets the kernel send buffer size (`SO_SNDBUF`). The corresponding C function is `setsockopt`.
    public func setSendBufferSize(_ bytes: Int) throws(SystemCallError) {
        try setOption(level: SOL_SOCKET, name: SO_SNDBUF, value: Int32(clamping: bytes))
    }

    /// Makes `close` send a reset (RST) instead of a graceful FIN (`SO_LINGER` with a zero timeout).
    /// Tests use it to simulate a client that vanishes. The corresponding C function is `setsockopt`.
    public func setResetOnClose() throws(SystemCallError) {
        var value = linger(l_onoff: 1, l_linger: 0)
        _ = try blockingSystemCall("setsockopt") {
            setsockopt(rawValue, SOL_SOCKET, SO_LINGER, &value, socklen_t(MemoryLayout<linger>.size))
        }
    }

    /// Whether `TCP_NODELAY` is set. The corresponding C function is `getsockopt`.
    public func isNoDelay() throws(SystemCallError) -> Bool {
        try option(level: Int32(IPPROTO_TCP), name: TCP_NODELAY) != 0
    }

    /// Sets an integer socket option. The corresponding C function is `setsockopt`.
    public func setOption(level: Int32, name: Int32, value: Int32) throws(SystemCallError) {
        var value = value
        _ = try blockingSystemCall("setsockopt") {
            setsockopt(rawValue, level, name, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Reads an integer socket option. The corresponding C function is `getsockopt`.
    public func option(level: Int32, name: Int32) throws(SystemCallError) -> Int32 {
        var value: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        _ = try blockingSystemCall("getsockopt") { getsockopt(rawValue, level, name, &value, &length) }
        return value
    }

    // MARK: - Readiness

    /// Waits up to `timeoutMilliseconds` (-1: forever) for the descriptor to become readable or writable.
    ///
    /// Blocks the calling thread; meant for clients and tests, never for the server's event loops.
    /// The corresponding C function is `poll`.
    public func poll(readable: Bool, writable: Bool, timeoutMilliseconds: Int32) throws(SystemCallError) -> PollResult {
        var entry = pollfd(fd: rawValue, events: 0, revents: 0)
        if readable { entry.events |= Int16(POLLIN) }
        if writable { entry.events |= Int16(POLLOUT) }
        let count = try blockingSystemCall("poll") { Glibc.poll(&entry, 1, timeoutMilliseconds) }
        let revents = Int32(entry.revents)
        return PollResult(
            readable: count > 0 && revents & (POLLIN | POLLHUP | POLLERR) != 0,
            writable: count > 0 && revents & (POLLOUT | POLLHUP | POLLERR) != 0,
            hangup: count > 0 && revents & (POLLHUP | POLLERR) != 0
        )
    }
}
