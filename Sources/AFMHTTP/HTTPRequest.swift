// SPDX-License-Identifier: Apache-2.0

/// A complete HTTP request: head and fully read body.
///
/// The server builds it only after the whole body has arrived (de-chunked when the client used chunked
/// transfer coding) and within the configured limits, so handlers never see partial input.
public struct HTTPRequest: Sendable {
    /// The method, as sent (`GET`, `POST`, …; methods are case-sensitive).
    public var method: String
    /// The request-target as sent, for example `/v1/responses?x=1`.
    public var target: String
    /// The target without its query, for example `/v1/responses`. For an absolute-form target
    /// (`http://host/p`) this is the path part (`/p`).
    public var path: String
    /// The part after the first `?`, without it, or `nil` when there is no `?`.
    public var query: String?
    /// The protocol version from the request line.
    public var version: HTTPVersion
    /// The header fields, in the order received.
    public var headers: HTTPHeaders
    /// The body bytes: `Content-Length` bytes or the de-chunked body; empty when there is none.
    public var body: [UInt8]
    /// The client's address, `127.0.0.1:54321` or `[::1]:54321`.
    public var remoteAddress: String
    /// The server-unique id of the connection, for log correlation.
    public var connectionID: UInt64

    /// Creates a request; the server does this, tests may too.
    public init(
        method: String,
        target: String,
        version: HTTPVersion = .http1_1,
        headers: HTTPHeaders = .init(),
        body: [UInt8] = [],
        remoteAddress: String = "",
        connectionID: UInt64 = 0
    ) {
        self.method = method
        self.target = target
        let split = Self.splitTarget(target)
        self.path = split.path
        self.query = split.query
        self.version = version
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.connectionID = connectionID
    }

    /// The parser's initializer: path and query were split from the bytes already.
    init(
        method: String, target: String, path: String, query: String?, version: HTTPVersion, headers: HTTPHeaders,
        body: [UInt8], remoteAddress: String, connectionID: UInt64
    ) {
        self.method = method
        self.target = target
        self.path = path
        self.query = query
        self.version = version
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.connectionID = connectionID
    }

    /// Splits a request-target into path and query; absolute-form targets lose their scheme and authority.
    static func splitTarget(_ target: String) -> (path: String, query: String?) {
        var target = target
        return target.withUTF8 { splitTarget(bytes: $0) }
    }

    /// Byte-level ``splitTarget(_:)``, used by the parser on the request line.
    static func splitTarget(bytes: UnsafeBufferPointer<UInt8>) -> (path: String, query: String?) {
        var start = 0
        let end = bytes.count
        if end > 0 && bytes[0] != ASCII.slash {
            // Absolute form, `http://authority/path?query`: skip to the first `/` or `?` after the authority.
            var index = 0
            while index + 2 < end {
                if bytes[index] == ASCII.colon && bytes[index + 1] == ASCII.slash && bytes[index + 2] == ASCII.slash {
                    break
                }
                index += 1
            }
            if index + 2 < end {
                index += 3
                while index < end && bytes[index] != ASCII.slash && bytes[index] != ASCII.question { index += 1 }
                start = index
            }
        }
        var question = start
        while question < end && bytes[question] != ASCII.question { question += 1 }
        let pathBytes = UnsafeBufferPointer(rebasing: bytes[start..<question])
        let path = pathBytes.isEmpty ? "/" : String(decoding: pathBytes, as: UTF8.self)
        guard question < end else { return (path, nil) }
        return (path, String(decoding: UnsafeBufferPointer(rebasing: bytes[(question + 1)..<end]), as: UTF8.self))
    }
}
