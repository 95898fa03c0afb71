// SPDX-License-Identifier: Apache-2.0

/// How the body of a request is delimited.
enum HTTPBodyFraming: Equatable, Sendable {
    case none
    case length(Int)
    case chunked
}

/// A parsed request line and header block, before the body.
struct HTTPRequestHead: Sendable {
    var method: String
    var target: String
    var path: String
    var query: String?
    var version: HTTPVersion
    var headers: HTTPHeaders
    /// Whether the connection may stay open after the response (HTTP/1.1 unless `Connection: close`; HTTP/1.0
    /// only with `Connection: keep-alive`).
    var keepAlive: Bool
    var framing: HTTPBodyFraming
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    var expectContinue: Bool
}

/// A request whose body has been read completely.
struct HTTPParsedRequest: Sendable {
    var head: HTTPRequestHead
    var body: [UInt8]
}
