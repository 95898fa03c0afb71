// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// `sd_listen_fds(3)` without libsystemd: the listening sockets systemd (or `systemd-socket-activate`) passed.
///
/// The protocol: descriptors 3, 4, … (`SD_LISTEN_FDS_START`) are open and listening, `LISTEN_FDS` says how many,
/// `LISTEN_PID` names the process they are for (a child that inherits the environment must not take them), and
/// `LISTEN_FDNAMES` optionally names them (`FileDescriptorName=`, colon-separated).
public enum SystemdSocketActivation {
    /// One passed socket.
    public struct Socket: Sendable {
        /// The listening descriptor (made close-on-exec here: runners must not inherit it).
        public var descriptor: FileDescriptor
        /// Its name from `LISTEN_FDNAMES`, or `unknown` (systemd's default).
        public var name: String
        /// Whether it is a Unix socket (else TCP).
        public var isUnix: Bool
    }

    /// The sockets passed to this process; empty when none were (or they were meant for another process).
    ///
    /// Each descriptor is made close-on-exec. The variables are not unset: afmd builds its children's environment
    /// from an allow-list, which leaves them out.
    public static func listeningSockets(environment: [String: String]) -> [Socket] {
        guard let pidText = environment["LISTEN_PID"], let pid = Int32(pidText), pid == getpid(),
            let countText = environment["LISTEN_FDS"], let count = Int(countText), count > 0, count < 1024
        else { return [] }
        let names = (environment["LISTEN_FDNAMES"] ?? "").split(separator: ":", omittingEmptySubsequences: false).map(String.init)
        var sockets: [Socket] = []
        for index in 0..<count {
            let raw = Int32(3 + index)
            let flags = fcntl(raw, F_GETFD)
            guard flags >= 0 else { continue }
            _ = fcntl(raw, F_SETFD, flags | FD_CLOEXEC)
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let family = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(raw, $0, &length) }
            } == 0 ? Int32(storage.ss_family) : -1
            guard family == AF_UNIX || family == AF_INET || family == AF_INET6 else { continue }
            sockets.append(
                Socket(
                    descriptor: FileDescriptor(rawValue: raw), name: index < names.count && !names[index].isEmpty ? names[index] : "unknown",
                    isUnix: family == AF_UNIX))
        }
        return sockets
    }
}
