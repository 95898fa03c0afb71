// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// An open file descriptor: a typed wrapper around the C `int`.
///
/// A `FileDescriptor` is a plain value and does not close itself. You are responsible for its lifetime in the
/// same way as for a raw C descriptor: exactly one owner calls ``close()``, and nobody uses the value
/// afterwards (the number may already belong to a new socket). Descriptors made by AFMSystem are always
/// close-on-exec, so a spawned process (a backend runner) never inherits a client socket.
public struct FileDescriptor: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The C descriptor number.
    public let rawValue: Int32

    /// Wraps a C descriptor number you already own.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// `fd 7`, for logs.
    public var description: String { "fd \(rawValue)" }

    // MARK: - Reading and writing

    /// Reads up to `buffer.count` bytes; `.processed(0)` means end of file.
    ///
    /// Retries `EINTR`; reports `EAGAIN` as ``IOResult/wouldBlock``. The corresponding C function is `read`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        try systemCall("read") { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Writes up to `buffer.count` bytes and returns how many were written.
    ///
    /// On sockets this uses `send` with `MSG_NOSIGNAL`, so a vanished peer gives `EPIPE` instead of killing the
    /// process with `SIGPIPE`. Retries `EINTR`; reports `EAGAIN` as ``IOResult/wouldBlock``.
    /// The corresponding C function is `send` (or `write` when the descriptor is not a socket).
    public func write(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        let result = try systemCall("send") {
            Glibc.send(rawValue, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL))
        }
        return result
    }

    /// Writes several buffers with one system call (gather write) and returns the total written.
    ///
    /// Uses `sendmsg` with `MSG_NOSIGNAL` (a `writev` that cannot raise `SIGPIPE`). Retries `EINTR`; reports
    /// `EAGAIN` as ``IOResult/wouldBlock``. The corresponding C function is `sendmsg`.
    public func writev(_ buffers: [UnsafeRawBufferPointer]) throws(SystemCallError) -> IOResult<Int> {
        // The iovec array lives on the stack: this is the hot path of every HTTP response.
        try withUnsafeTemporaryAllocation(of: iovec.self, capacity: buffers.count) {
            (vectors) throws(SystemCallError) -> IOResult<Int> in
            for (index, buffer) in buffers.enumerated() {
                vectors[index] = iovec(
                    iov_base: UnsafeMutableRawPointer(mutating: buffer.baseAddress), iov_len: buffer.count)
            }
            var message = msghdr()
            message.msg_iov = vectors.baseAddress
            message.msg_iovlen = vectors.count
            return try systemCall("sendmsg") { sendmsg(rawValue, &message, Int32(MSG_NOSIGNAL)) }
        }
    }

    /// Writes bytes to a descriptor that is not a socket (a pipe, a file). The corresponding C function is `write`.
    public func writeFile(_ buffer: UnsafeRawBufferPointer) throws(SystemCallError) -> IOResult<Int> {
        try systemCall("write") { Glibc.write(rawValue, buffer.baseAddress, buffer.count) }
    }

    // MARK: - Lifetime and flags

    /// Closes the descriptor.
    ///
    /// Never retried: on Linux the descriptor is released even when `close` reports `EINTR`, so a retry could
    /// close a descriptor another thread just opened. Errors other than `EBADF` are ignored for the same
    /// reason (there is nothing useful to do). The corresponding C function is `close`.
    public func close() {
        let result = Glibc.close(rawValue)
        if result < 0 {
            precondition(errno != EBADF, "close(\(rawValue)): descriptor was not open (double close)")
        }
    }

    /// Switches `O_NONBLOCK` on or off. The corresponding C function is `fcntl`.
    public func setNonBlocking(_ on: Bool) throws(SystemCallError) {
        let flags = try blockingSystemCall("fcntl") { fcntl(rawValue, F_GETFL) }
        let updated = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK
        if updated != flags {
            _ = try blockingSystemCall("fcntl") { fcntl(rawValue, F_SETFL, updated) }
        }
    }

    /// A second descriptor of the same open file (socket), close-on-exec. The corresponding C function is `fcntl`
    /// (`F_DUPFD_CLOEXEC`).
    public func duplicate() throws(SystemCallError) -> FileDescriptor {
        FileDescriptor(rawValue: try blockingSystemCall("fcntl") { fcntl(rawValue, F_DUPFD_CLOEXEC, 0) })
    }

    /// Whether the close-on-exec flag is set. The corresponding C function is `fcntl`.
    public func isCloseOnExec() throws(SystemCallError) -> Bool {
        let flags = try blockingSystemCall("fcntl") { fcntl(rawValue, F_GETFD) }
        return flags & FD_CLOEXEC != 0
    }

    /// Runs `body`, then closes the descriptor, even when `body` throws.
    public func closeAfter<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        defer { close() }
        return try body()
    }
}
