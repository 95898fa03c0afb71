// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// An IPv4 or IPv6 socket address (host and port).
///
/// Prints as `127.0.0.1:54321` or `[::1]:54321`, the form used in logs and in `HTTPRequest.remoteAddress`.
public enum SocketAddress: Sendable, Hashable, CustomStringConvertible {
    /// An IPv4 address: four address bytes in network order and a port.
    case ipv4(address: [UInt8], port: Int)
    /// An IPv6 address: sixteen address bytes in network order and a port.
    case ipv6(address: [UInt8], port: Int)

    /// The port number.
    public var port: Int {
        switch self {
        case .ipv4(_, let port), .ipv6(_, let port): port
        }
    }

    /// The host part alone: `127.0.0.1` or `::1`.
    public var host: String {
        switch self {
        case .ipv4(let address, _): return Self.format(family: AF_INET, bytes: address)
        case .ipv6(let address, _): return Self.format(family: AF_INET6, bytes: address)
        }
    }

    /// `127.0.0.1:54321` or `[::1]:54321`.
    public var description: String {
        switch self {
        case .ipv4: "\(host):\(port)"
        case .ipv6: "[\(host)]:\(port)"
        }
    }

    /// Resolves a listen or connect host without DNS.
    ///
    /// Accepts an IPv4 literal (`127.0.0.1`, `0.0.0.0`), an IPv6 literal with or without brackets (`::1`,
    /// `[::]`) and `localhost`, which means `127.0.0.1` (deliberately not `::1`: /etc/hosts differs between
    /// machines, and a gateway bound to loopback should behave the same everywhere).
    /// - Returns: `nil` when `host` is none of these, or `port` is outside 0...65535.
    public init?(host: String, port: Int) {
        guard (0...65535).contains(port) else { return nil }
        var name = host
        if name == "localhost" { name = "127.0.0.1" }
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        var v4 = in_addr()
        if inet_pton(AF_INET, name, &v4) == 1 {
            self = .ipv4(address: withUnsafeBytes(of: &v4) { Array($0) }, port: port)
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, name, &v6) == 1 {
            self = .ipv6(address: withUnsafeBytes(of: &v6) { Array($0) }, port: port)
            return
        }
        return nil
    }

    // MARK: - C conversions

    /// Calls `body` with this address as a C `sockaddr` and its length.
    func withSockAddr<R, E: Error>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws(E) -> R) throws(E) -> R {
        var storage = sockaddr_storage()
        let length: Int
        switch self {
        case .ipv4(let address, let port):
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: address) }
            withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: withUnsafeBytes(of: &sin) { Array($0) }) }
            length = MemoryLayout<sockaddr_in>.size
        case .ipv6(let address, let port):
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = UInt16(port).bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: address) }
            withUnsafeMutableBytes(of: &storage) { $0.copyBytes(from: withUnsafeBytes(of: &sin6) { Array($0) }) }
            length = MemoryLayout<sockaddr_in6>.size
        }
        return try withUnsafePointer(to: &storage) { (pointer) throws(E) -> R in
            try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { (address) throws(E) -> R in
                try body(address, socklen_t(length))
            }
        }
    }

    /// The address family constant (`AF_INET` or `AF_INET6`).
    var family: Int32 {
        switch self {
        case .ipv4: AF_INET
        case .ipv6: AF_INET6
        }
    }

    /// Reads an address that the kernel filled in (`accept`, `getsockname`); `nil` for other families.
    init?(storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let sin = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            var addr = sin.sin_addr
            self = .ipv4(address: withUnsafeBytes(of: &addr) { Array($0) }, port: Int(UInt16(bigEndian: sin.sin_port)))
        case AF_INET6:
            let sin6 = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            var addr = sin6.sin6_addr
            self = .ipv6(
                address: withUnsafeBytes(of: &addr) { Array($0) }, port: Int(UInt16(bigEndian: sin6.sin6_port)))
        default:
            return nil
        }
    }

    private static func format(family: Int32, bytes: [UInt8]) -> String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let ok = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &text, socklen_t(text.count)) != nil
        }
        guard ok else { return "?" }
        return String(decoding: text.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
