// SPDX-License-Identifier: Apache-2.0

/// Serializes response heads, chunk framing and the server's own error responses into bytes.
///
/// Everything is appended to one `[UInt8]` so that a response leaves in one `send`/`sendmsg` call.
enum HTTPResponseEncoder {
    /// How a response body is delimited on the wire.
    enum Framing: Equatable {
        /// `Content-Length: n` followed by `n` bytes (also used for HEAD, without the bytes).
        case length(Int)
        /// `Transfer-Encoding: chunked`.
        case chunked
        /// The body ends when the connection closes (streaming to an HTTP/1.0 client).
        case closeDelimited
        /// No body and no length (204, 304).
        case none
    }

    /// What to say in the `Connection` field.
    enum ConnectionField {
        /// Nothing (HTTP/1.1 keep-alive is the default).
        case omit
        /// `Connection: keep-alive` (needed by HTTP/1.0 clients).
        case keepAlive
        /// `Connection: close`.
        case close
    }

    /// Fields the server computes itself; user values for them are dropped.
    private static func isFramingField(_ name: String) -> Bool {
        switch name.utf8.count {
        case 10: HTTPHeaders.namesEqual(name, "connection") || HTTPHeaders.namesEqual(name, "keep-alive")
        case 14: HTTPHeaders.namesEqual(name, "content-length")
        case 17: HTTPHeaders.namesEqual(name, "transfer-encoding")
        default: false
        }
    }

    /// Encodes a status line and header block.
    ///
    /// - Parameter reservingBody: extra capacity to reserve so the caller can append a small body without
    ///   reallocating.
    /// - Throws: `.invalidState` for a status outside 200–599 or a field that would break the framing
    ///   (invalid name, CR/LF/NUL in a value).
    static func encodeHead(
        status: Int,
        headers: HTTPHeaders,
        framing: Framing,
        connection: ConnectionField,
        date: [UInt8],
        serverName: String?,
        reservingBody: Int = 0
    ) throws(HTTPWriteError) -> [UInt8] {
        guard (200...599).contains(status) else {
            throw .invalidState("response status must be in 200...599, got \(status)")
        }
        var out: [UInt8] = []
        out.reserveCapacity(128 + reservingBody + headers.count * 32)
        out.append(contentsOf: "HTTP/1.1 ".utf8)
        ASCII.appendDecimal(status, to: &out)
        out.append(ASCII.space)
        out.append(contentsOf: reasonPhrase(status).utf8)
        out.append(contentsOf: ASCII.crlf)

        var hasDate = false
        var hasServer = false
        for (name, value) in headers {
            if isFramingField(name) { continue }
            guard isValidName(name) else { throw .invalidState("invalid header name \"\(name)\"") }
            guard isValidValue(value) else { throw .invalidState("header \(name) contains a control character") }
            if !hasDate && HTTPHeaders.namesEqual(name, "date") { hasDate = true }
            if !hasServer && HTTPHeaders.namesEqual(name, "server") { hasServer = true }
            out.append(contentsOf: name.utf8)
            out.append(contentsOf: ": ".utf8)
            out.append(contentsOf: value.utf8)
            out.append(contentsOf: ASCII.crlf)
        }
        if !hasDate {
            out.append(contentsOf: "Date: ".utf8)
            out.append(contentsOf: date)
            out.append(contentsOf: ASCII.crlf)
        }
        if !hasServer, let serverName {
            out.append(contentsOf: "Server: ".utf8)
            out.append(contentsOf: serverName.utf8)
            out.append(contentsOf: ASCII.crlf)
        }
        switch framing {
        case .length(let length):
            out.append(contentsOf: "Content-Length: ".utf8)
            ASCII.appendDecimal(length, to: &out)
            out.append(contentsOf: ASCII.crlf)
        case .chunked:
            out.append(contentsOf: "Transfer-Encoding: chunked\r\n".utf8)
        case .closeDelimited, .none:
            break
        }
        switch connection {
        case .omit: break
        case .keepAlive: out.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        case .close: out.append(contentsOf: "Connection: close\r\n".utf8)
        }
        out.append(contentsOf: ASCII.crlf)
        return out
    }

    private static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(ASCII.isToken)
    }

    private static func isValidValue(_ value: String) -> Bool {
        value.utf8.allSatisfy(ASCII.isFieldValueByte)
    }

    /// Whether `head` asks for the connection to close after this response.
    static func requestsClose(_ headers: HTTPHeaders) -> Bool {
        for value in headers.values(for: "connection") {
            for element in value.split(separator: ",") where element.trimmingSpaces.lowercased() == "close" {
                return true
            }
        }
        return false
    }

    /// Chunk framing placed before a chunk's data: `<hex size>\r\n`.
    static func chunkHeader(size: Int) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(18)
        ASCII.appendHex(size, to: &out)
        out.append(contentsOf: ASCII.crlf)
        return out
    }

    /// The last chunk with no trailers.
    static let lastChunk: [UInt8] = Array("0\r\n\r\n".utf8)

    /// The interim response sent for `Expect: 100-continue`.
    static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    /// A complete error response with the JSON envelope, always closing the connection unless told otherwise.
    ///
    /// - Parameter body: the error body to send instead of the default ``HTTPErrorBody`` envelope (rendered by
    ///   ``HTTPServer/Configuration/errorBody`` for the request's path).
    static func errorResponse(
        status: Int,
        code: String,
        message: String,
        date: [UInt8],
        serverName: String?,
        close: Bool = true,
        headOnly: Bool = false,
        retryAfterSeconds: Int? = nil,
        body rendered: [UInt8]? = nil
    ) -> [UInt8] {
        let body = rendered ?? HTTPErrorBody.json(message: message, type: HTTPErrorBody.type(forStatus: status), code: code)
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        if let retryAfterSeconds { headers.add(name: "Retry-After", value: "\(retryAfterSeconds)") }
        // The force try is safe: the status is one of the server's own and the fields above are constants.
        var out = try! encodeHead(
            status: status, headers: headers, framing: .length(body.count), connection: close ? .close : .omit,
            date: date, serverName: serverName, reservingBody: body.count)
        if !headOnly { out.append(contentsOf: body) }
        return out
    }

    /// The reason phrase for a status (empty for unknown codes, which RFC 9112 allows).
    static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 206: "Partial Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 303: "See Other"
        case 304: "Not Modified"
        case 307: "Temporary Redirect"
        case 308: "Permanent Redirect"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 406: "Not Acceptable"
        case 408: "Request Timeout"
        case 409: "Conflict"
        case 410: "Gone"
        case 411: "Length Required"
        case 412: "Precondition Failed"
        case 413: "Content Too Large"
        case 414: "URI Too Long"
        case 415: "Unsupported Media Type"
        case 417: "Expectation Failed"
        case 422: "Unprocessable Content"
        case 426: "Upgrade Required"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 499: "Client Closed Request"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        case 505: "HTTP Version Not Supported"
        default: ""
        }
    }

    /// Formats an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) from Unix seconds, without Foundation.
    static func httpDate(unixSeconds: Int) -> [UInt8] {
        let days = unixSeconds >= 0 ? unixSeconds / 86_400 : (unixSeconds - 86_399) / 86_400
        let secondsOfDay = unixSeconds - days * 86_400
        // 1970-01-01 was a Thursday.
        let weekday = ((days % 7) + 11) % 7  // 0 = Sunday
        // Civil-from-days (Howard Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)

        let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        var out: [UInt8] = []
        out.reserveCapacity(29)
        func two(_ value: Int) {
            out.append(UInt8(ascii: "0") + UInt8(value / 10))
            out.append(UInt8(ascii: "0") + UInt8(value % 10))
        }
        out.append(contentsOf: weekdays[weekday].utf8)
        out.append(contentsOf: ", ".utf8)
        two(day)
        out.append(ASCII.space)
        out.append(contentsOf: months[month - 1].utf8)
        out.append(ASCII.space)
        ASCII.appendDecimal(year, to: &out)
        out.append(ASCII.space)
        two(secondsOfDay / 3600)
        out.append(ASCII.colon)
        two(secondsOfDay % 3600 / 60)
        out.append(ASCII.colon)
        two(secondsOfDay % 60)
        out.append(contentsOf: " GMT".utf8)
        return out
    }
}

extension Substring {
    /// The substring without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
