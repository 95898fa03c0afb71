// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// The credentials of the process at the other end of a Unix stream socket, as the kernel recorded them at
/// `connect()` time (`SO_PEERCRED`). They cannot be forged by the peer.
public struct PeerCredentials: Sendable, Hashable, CustomStringConvertible {
    /// The peer's process id.
    public var pid: Int32
    /// The peer's effective user id.
    public var uid: UInt32
    /// The peer's effective group id.
    public var gid: UInt32

    /// Creates credentials (tests use this to exercise level decisions without a socket).
    public init(pid: Int32, uid: UInt32, gid: UInt32) {
        self.pid = pid
        self.uid = uid
        self.gid = gid
    }

    public var description: String { "pid=\(pid) uid=\(uid) gid=\(gid)" }
}

/// Why ``FileDescriptor/makeUnixListener(path:mode:group:backlog:)`` refused to bind.
public enum UnixListenerError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Another process accepts connections on this path; it was left alone.
    case inUse(path: String)
    /// Something that is not a socket exists at this path; it was left alone.
    case notASocket(path: String)
    /// The path does not fit in `sockaddr_un` (107 bytes).
    case pathTooLong(path: String)
    /// A system call failed.
    case system(path: String, SystemCallError)

    public var description: String {
        switch self {
        case .inUse(let path): "\(path): another process is already serving this socket"
        case .notASocket(let path): "\(path): exists and is not a socket; refusing to replace it"
        case .pathTooLong(let path): "\(path): a Unix socket path may be at most 107 bytes"
        case .system(let path, let error): "\(path): \(error)"
        }
    }
}

extension FileDescriptor {
    // Linux ABI constants from <asm-generic/socket.h> (x86_64 and aarch64 share them).
    private static let peerCredentialsOption: Int32 = 17  // SO_PEERCRED
    private static let peerGroupsOption: Int32 = 59  // SO_PEERGROUPS

    /// Binds a close-on-exec Unix stream socket at `path`, sets its mode (and group), and listens.
    ///
    /// A stale socket file (nothing accepts on it: `ECONNREFUSED`) is removed first. A live socket, or a file
    /// that is not a socket, is never touched. The socket is blocking; use ``accept()`` after ``Epoll`` readiness
    /// or switch it with ``setNonBlocking(_:)``.
    /// - Parameters:
    ///   - mode: permission bits of the socket file (connecting needs write permission), for example `0o660`.
    ///   - group: a group id to own the socket file, or `nil` to keep the creator's group.
    /// The corresponding C functions are `socket`, `bind`, `chmod`, `chown` and `listen`.
    public static func makeUnixListener(
        path: String,
        mode: UInt32 = 0o660,
        group: UInt32? = nil,
        backlog: Int32 = 64
    ) throws(UnixListenerError) -> FileDescriptor {
        guard path.utf8.count < 108 else { throw .pathTooLong(path: path) }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard info.st_mode & S_IFMT == S_IFSOCK else { throw .notASocket(path: path) }
            do {
                let probe = try connectUnix(path: path)
                probe.close()
                throw UnixListenerError.inUse(path: path)
            } catch let error as UnixListenerError {
                throw error
            } catch {
                // Refused (or the file is an orphan): nobody serves it, so it is stale.
                unlink(path)
            }
        }
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let raw: Int32
        do {
            raw = try blockingSystemCall("socket") { socket(AF_UNIX, type, 0) }
        } catch {
            throw .system(path: path, error)
        }
        let fd = FileDescriptor(rawValue: raw)
        do throws(SystemCallError) {
            // Bind with a private umask so the socket never exists with wider permissions than asked for.
            let previous = umask(0o177)
            let bound = withUnixAddress(path) { address, length in bind(raw, address, length) }
            let bindErrno = errno
            umask(previous)
            if bound < 0 { throw SystemCallError(call: "bind", errno: Errno(rawValue: bindErrno)) }
            _ = try blockingSystemCall("chmod") { chmod(path, mode_t(mode)) }
            if let group {
                _ = try blockingSystemCall("chown") { chown(path, uid_t.max, gid_t(group)) }
            }
            _ = try blockingSystemCall("listen") { listen(raw, backlog) }
        } catch {
            fd.close()
            throw .system(path: path, error)
        }
        return fd
    }

    /// Connects a blocking, close-on-exec Unix stream socket to `path`.
    ///
    /// - Throws: `SystemCallError` for `connect` (`ENOENT`: no socket; `ECONNREFUSED`: nobody listening;
    ///   `EACCES`: no permission). The corresponding C functions are `socket` and `connect`.
    public static func connectUnix(path: String) throws(SystemCallError) -> FileDescriptor {
        guard path.utf8.count < 108 else { throw SystemCallError(call: "connect", errno: Errno(rawValue: ENAMETOOLONG)) }
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let raw = try blockingSystemCall("socket") { socket(AF_UNIX, type, 0) }
        let fd = FileDescriptor(rawValue: raw)
        do {
            _ = try blockingSystemCall("connect") { withUnixAddress(path) { connect(raw, $0, $1) } }
        } catch {
            fd.close()
            throw error
        }
        return fd
    }

    /// The credentials of the connected peer. The corresponding C function is `getsockopt` with `SO_PEERCRED`.
    public func peerCredentials() throws(SystemCallError) -> PeerCredentials {
        // Swift's Glibc module lacks `struct ucred` (it needs _GNU_SOURCE): {pid_t, uid_t, gid_t}.
        var words: (Int32, UInt32, UInt32) = (0, 0, 0)
        var length = socklen_t(MemoryLayout<(Int32, UInt32, UInt32)>.size)
        _ = try blockingSystemCall("getsockopt") {
            getsockopt(rawValue, SOL_SOCKET, Self.peerCredentialsOption, &words, &length)
        }
        return PeerCredentials(pid: words.0, uid: words.1, gid: words.2)
    }

    /// The supplementary groups of the connected peer (Linux 4.13+), all of them, or `nil` when the kernel lacks
    /// `SO_PEERGROUPS` or the call fails otherwise.
    ///
    /// A peer may have up to 65536 groups; when the buffer is too small the kernel answers `ERANGE` and reports the
    /// size it needs, so the call is repeated with that size (a truncated or missing list would make the caller fall
    /// back to a guess). The corresponding C function is `getsockopt` with `SO_PEERGROUPS`.
    public func peerGroups() -> [UInt32]? {
        var capacity = 64
        while true {
            var groups = [UInt32](repeating: 0, count: capacity)
            var length = socklen_t(capacity * 4)
            let result = groups.withUnsafeMutableBytes { raw in
                getsockopt(rawValue, SOL_SOCKET, Self.peerGroupsOption, raw.baseAddress, &length)
            }
            if result == 0 { return Array(groups.prefix(Int(length) / 4)) }
            // ERANGE: `length` now holds the size needed (the peer's groups are fixed, so one retry suffices;
            // the loop also covers a kernel that reports less than it then wants).
            guard errno == ERANGE else { return nil }
            capacity = max(Int(length) / 4, capacity * 2)
        }
    }

    /// Sets how long a blocking receive may wait (`SO_RCVTIMEO`); zero waits forever.
    /// The corresponding C function is `setsockopt`.
    public func setReceiveTimeout(milliseconds: Int) throws(SystemCallError) {
        var value = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        _ = try blockingSystemCall("setsockopt") {
            setsockopt(rawValue, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Sets how long a blocking send may wait (`SO_SNDTIMEO`); zero waits forever.
    /// The corresponding C function is `setsockopt`.
    public func setSendTimeout(milliseconds: Int) throws(SystemCallError) {
        var value = timeval(tv_sec: milliseconds / 1000, tv_usec: (milliseconds % 1000) * 1000)
        _ = try blockingSystemCall("setsockopt") {
            setsockopt(rawValue, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Writes all of `bytes` on a blocking socket, retrying short writes.
    ///
    /// - Throws: `SystemCallError` (`EPIPE` when the peer has gone, `EAGAIN` when a send timeout expired).
    public func writeAll(_ bytes: [UInt8]) throws(SystemCallError) {
        var offset = 0
        while offset < bytes.count {
            let attempt: Result<IOResult<Int>, SystemCallError> = bytes.withUnsafeBytes { raw in
                do throws(SystemCallError) {
                    return .success(try write(UnsafeRawBufferPointer(rebasing: raw[offset...])))
                } catch {
                    return .failure(error)
                }
            }
            switch try attempt.get() {
            case .processed(let count): offset += count
            case .wouldBlock: throw SystemCallError(call: "send", errno: .wouldBlock)
            }
        }
    }

    /// Reads up to `maximum` bytes on a blocking socket; an empty array means end of file.
    ///
    /// - Throws: `SystemCallError` (`EAGAIN` when a receive timeout expired).
    public func readSome(maximum: Int = 65_536) throws(SystemCallError) -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: maximum)
        let attempt: Result<IOResult<Int>, SystemCallError> = buffer.withUnsafeMutableBytes { raw in
            do throws(SystemCallError) {
                return .success(try read(into: raw))
            } catch {
                return .failure(error)
            }
        }
        switch try attempt.get() {
        case .processed(let count): return Array(buffer.prefix(count))
        case .wouldBlock: throw SystemCallError(call: "read", errno: .wouldBlock)
        }
    }
}

/// Removes a file system entry, ignoring a missing one. The corresponding C function is `unlink`.
public func removeFileIfPresent(_ path: String) {
    _ = unlink(path)
}

private func withUnixAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let bytes = Array(path.utf8)
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
        raw.copyBytes(from: bytes)
        raw[bytes.count] = 0
    }
    let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
    return withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
    }
}
