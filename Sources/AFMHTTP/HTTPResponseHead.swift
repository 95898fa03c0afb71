// SPDX-License-Identifier: Apache-2.0

/// The status and header fields of a response.
///
/// The server owns the framing fields: `Content-Length`, `Transfer-Encoding` and `Connection` set here are
/// replaced by what the server computes (a `Connection: close` here is honoured: the connection closes after
/// this response). `Date` and `Server` are added when absent.
public struct HTTPResponseHead: Sendable {
    /// The status code, for example 200.
    public var status: Int
    /// The header fields to send.
    public var headers: HTTPHeaders

    /// Creates a response head.
    public init(status: Int, headers: HTTPHeaders = .init()) {
        self.status = status
        self.headers = headers
    }
}
