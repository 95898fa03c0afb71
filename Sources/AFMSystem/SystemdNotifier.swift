// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// `sd_notify(3)` without libsystemd: one datagram to the socket named by `NOTIFY_SOCKET`.
///
/// systemd sets `NOTIFY_SOCKET` for `Type=notify` services; elsewhere it is unset and every call does nothing.
/// A name starting with `@` is in the abstract namespace (reference/operations.md §3.3).
public struct SystemdNotifier: Sendable {
    private let path: String?

    /// Reads `NOTIFY_SOCKET` from `environment`.
    public init(environment: [String: String]) {
        let value = environment["NOTIFY_SOCKET"] ?? ""
        path = value.isEmpty ? nil : value
    }

    /// Whether a notify socket is configured.
    public var isEnabled: Bool { path != nil }

    /// Sends `state` (for example `"READY=1"` or `"RELOADING=1\nMONOTONIC_USEC=…"`). Failures are returned,
    /// not thrown: a lost notification must never stop the daemon.
    /// The corresponding C functions are `socket` and `sendto`.
    @discardableResult
    public func notify(_ state: String) -> Bool {
        guard let path else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { _ = Glibc.close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        var bytes = Array(path.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return false }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        // Abstract names are exactly as long as given; file names include their terminating NUL.
        let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (abstract ? 0 : 1))
        let message = Array(state.utf8)
        let sent = message.withUnsafeBytes { buffer in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, buffer.baseAddress, buffer.count, Int32(MSG_NOSIGNAL), $0, length)
                }
            }
        }
        return sent == message.count
    }

    /// `MONOTONIC_USEC=` for `RELOADING=1`, from `CLOCK_MONOTONIC`.
    public static func monotonicMicroseconds() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
    }
}
