// SPDX-License-Identifier: Apache-2.0

/// Where the HTTP API listens: a TCP `HOST:PORT`, or a Unix stream socket `unix:/PATH`.
///
/// A Unix socket is local by construction (its file's permissions, `[Server] ListenSocketMode`, decide who may
/// connect), so it needs no API keys to be served, like loopback.
public enum ListenAddress: Sendable, Hashable, CustomStringConvertible {
    /// A TCP address.
    case tcp(HostPort)
    /// A Unix stream socket at an absolute path.
    case unix(path: String)

    /// Parses `HOST:PORT` or `unix:/PATH` (absolute, at most 107 bytes, as `sockaddr_un` allows); `nil` otherwise.
    public init?(_ text: String) {
        if text.hasPrefix("unix:") {
            let path = String(text.dropFirst("unix:".count))
            guard path.hasPrefix("/"), path.utf8.count < 108, !path.contains("\0") else { return nil }
            self = .unix(path: path)
            return
        }
        guard let address = HostPort(text) else { return nil }
        self = .tcp(address)
    }

    /// The TCP address, or nil for a Unix socket.
    public var hostPort: HostPort? {
        if case .tcp(let address) = self { return address }
        return nil
    }

    /// `127.0.0.1:11535`, `[::1]:8080` or `unix:/run/afm/api.sock`.
    public var description: String {
        switch self {
        case .tcp(let address): address.description
        case .unix(let path): "unix:\(path)"
        }
    }
}
