// SPDX-License-Identifier: Apache-2.0

/// Why an admin call failed on the client side.
public enum AdminClientError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The socket could not be reached: no socket (`ENOENT`), nobody listening (`ECONNREFUSED`), or no
    /// permission (`EACCES`).
    case cannotConnect(path: String, reason: String, permissionDenied: Bool)
    /// No reply arrived in time.
    case timedOut(method: String, milliseconds: Int)
    /// The daemon closed the connection before the reply was complete.
    case connectionClosed
    /// The reply was not a varlink message.
    case protocolError(String)
    /// The daemon answered with an error.
    case remote(AdminError)

    public var description: String {
        switch self {
        case .cannotConnect(let path, let reason, _): "cannot connect to the admin socket \(path): \(reason)"
        case .timedOut(let method, let milliseconds): "\(method): no reply within \(milliseconds) ms"
        case .connectionClosed: "the daemon closed the admin connection"
        case .protocolError(let message): "protocol error: \(message)"
        case .remote(let error): error.description
        }
    }
}
