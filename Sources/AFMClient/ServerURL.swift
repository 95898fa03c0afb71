// SPDX-License-Identifier: Apache-2.0
import AFMSystem

/// An `http://host:port[/prefix]` URL of afmd (TLS is not spoken; use a local proxy for remote daemons).
public struct ServerURL: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int
    /// A path prefix without a trailing slash ("" for none).
    public var pathPrefix: String

    /// The default: afmd on the loopback port.
    public static let `default` = ServerURL(host: "127.0.0.1", port: 11535, pathPrefix: "")

    public init(host: String, port: Int, pathPrefix: String) {
        self.host = host
        self.port = port
        self.pathPrefix = pathPrefix
    }

    /// Parses `http://HOST[:PORT][/PREFIX]`; nil for anything else.
    public init?(string: String) {
        guard string.hasPrefix("http://") else { return nil }
        var rest = Substring(string.dropFirst("http://".count))
        var prefix = ""
        if let slash = rest.firstIndex(of: "/") {
            prefix = String(rest[slash...])
            rest = rest[..<slash]
        }
        while prefix.hasSuffix("/") { prefix.removeLast() }
        var host = String(rest)
        var port = 80
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { return nil }
            host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if after.hasPrefix(":") {
                guard let value = Int(after.dropFirst()) else { return nil }
                port = value
            }
        } else if let colon = rest.lastIndex(of: ":") {
            host = String(rest[..<colon])
            guard let value = Int(rest[rest.index(after: colon)...]) else { return nil }
            port = value
        }
        guard !host.isEmpty, (1...65535).contains(port) else { return nil }
        self.init(host: host, port: port, pathPrefix: prefix)
    }

    /// The socket address; `localhost` means 127.0.0.1. Other names are not resolved.
    public var socketAddress: SocketAddress? {
        SocketAddress(host: host == "localhost" ? "127.0.0.1" : host, port: port)
    }

    /// The `Host` header value.
    public var hostHeader: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    public var description: String { "http://\(hostHeader)\(pathPrefix)" }
}
