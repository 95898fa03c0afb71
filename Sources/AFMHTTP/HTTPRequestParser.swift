// SPDX-License-Identifier: Apache-2.0

/// An incremental HTTP/1.1 request parser: a value-type state machine fed bytes, producing requests.
///
/// Bytes go in with ``feed(_:)``; ``next()`` returns the next complete request, an interim "send 100
/// Continue" signal, a protocol error, or "need more data". It does no I/O, so it is tested directly.
///
/// ```
///  head ──(no body)──────────────────────────────► request ─┐
///   │ ──(Content-Length)──► length body ──────────► request ─┤──► head (next pipelined request)
///   │ ──(chunked)──► size line ⇄ data ⇄ data CRLF          │
///   │                   └─(0)──► trailers ──(empty)► request ─┘
///   └──(any violation)──► failed (the connection answers 4xx/5xx and closes)
/// ```
///
/// Strictness, and its deliberate exceptions:
/// - Bare LF is accepted as the line ending of the request line and header fields (RFC 9112 §2.2 allows it); a CR
///   anywhere else is rejected. Chunk-size lines, the CRLF after chunk data, trailer fields and the empty line
///   that ends a chunked body must end in CRLF (400 otherwise): a proxy in front that reads a bare LF there
///   differently would see a different request boundary (request smuggling).
/// - A declared `Content-Length` reserves at most ``initialBodyReservation`` bytes before the body arrives; the
///   body buffer then grows geometrically with the bytes received, never past the declared length.
/// - Empty lines before a request line are skipped (RFC 9112 §2.2: clients may send an extra CRLF after a body).
/// - Rejected with 400: a bad method token, a missing or malformed version (HTTP/0.9-style `GET /`, or
///   `HTTP/0.9`), more than
///   single spaces in the request line, control characters in the target, a field line without a colon,
///   whitespace before the colon, invalid field-name characters, control characters in a value, obs-fold,
///   missing or repeated `Host` on HTTP/1.1, invalid or conflicting `Content-Length`, `Content-Length`
///   together with `Transfer-Encoding`, `Transfer-Encoding` on HTTP/1.0, `chunked` repeated or not last,
///   malformed chunk lines.
/// - 431 when the request line and headers exceed `maxHeaderBytes`, or the field lines exceed `maxHeaderFields`
///   (also for chunked trailers): a request of thousands of tiny fields costs a `String` pair each.
/// - 413 when `Content-Length` (or the running total of chunk sizes) exceeds `maxBodyBytes`, decided from the
///   declared sizes before the body is read.
/// - 501 for a transfer coding other than `chunked` (`gzip, chunked`): valid HTTP that this server does not
///   implement. 505 for a major version of 2 or more. 417 for an `Expect` other than `100-continue`.
/// - Chunk extensions and trailer fields are checked for control characters and otherwise ignored.
struct HTTPRequestParser {
    /// Size limits applied while parsing.
    struct Limits: Sendable {
        var maxHeaderBytes: Int
        var maxBodyBytes: Int
        /// The most header field lines a request may have (and, separately, trailer field lines).
        var maxHeaderFields = 100
    }

    /// What ``next()`` found.
    enum Event {
        /// Nothing complete yet; feed more bytes.
        case needMoreData
        /// The head of a request with `Expect: 100-continue` and an acceptable body size arrived, and no body
        /// bytes yet: send `100 Continue`, then call ``next()`` again.
        case expectContinue
        /// A complete request.
        case request(HTTPParsedRequest)
        /// The input is invalid; the parser is now failed and must not be used further.
        case error(HTTPParseError)
    }

    private enum Phase {
        case head
        case lengthBody
        case chunkSize
        case chunkData
        case chunkDataEnd
        case trailers
        case failed
    }

    /// The longest chunk-size line (size, extensions) accepted.
    static let maxChunkLineBytes = 4096

    let limits: Limits
    private var buffer: [UInt8] = []
    /// Bytes before this index are consumed.
    private var readIndex = 0
    /// Where the search for the end of the header block resumes (avoids rescanning slow senders' bytes).
    private var scanIndex = 0
    private var phase = Phase.head
    private var head: HTTPRequestHead?
    /// The path of the request line of the request being received, once that line is complete (read even from a
    /// line the parser refuses): errors raised before the whole header block is parsed (a bad request line, 505,
    /// 431, 417, 501, a 408 while the headers trickle in) are answered in the envelope of the endpoint it names.
    private var requestLinePath: String?
    /// Whether the request line of the request being received was looked at (it is parsed once).
    private var requestLineSeen = false
    private var body: [UInt8] = []
    /// Bytes of the Content-Length body or of the current chunk still to come.
    private var remaining = 0
    /// The most the body can grow to: the declared `Content-Length`, or the body limit for a chunked body.
    private var bodyCeiling = 0
    private var trailerBytes = 0
    private var trailerFields = 0

    init(limits: Limits) { self.limits = limits }

    /// Bytes received but not yet consumed by a complete request.
    var bufferedByteCount: Int { buffer.count - readIndex }

    /// Whether part of a request (head bytes or body) has been received.
    var hasPartialRequest: Bool { phase != .head || readIndex < buffer.count }

    /// The path of the request being received, once its request line was parsed (for the body of a 408).
    var pendingPath: String? { head?.path ?? requestLinePath }

    /// The path of the request that failed, when its request line had been parsed (a 431 while the headers are
    /// read, a 413 decided from the head), so the error can be answered in the envelope of the endpoint it was
    /// sent to.
    private(set) var failedPath: String?

    /// Whether the parser is in the failed state.
    var isFailed: Bool { phase == .failed }

    /// The most body capacity reserved from a declared `Content-Length` before any body byte arrived.
    static let initialBodyReservation = 64 * 1024

    /// The capacity of the body buffer of the request being received (for memory tests).
    var reservedBodyCapacity: Int { body.capacity }

    // MARK: - Input

    /// Appends received bytes.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty, phase != .failed else { return }
        var input = bytes
        if readIndex == buffer.count {
            if !buffer.isEmpty {
                // Everything buffered was consumed: start over instead of growing (keeps big bodies from
                // leaving a big buffer behind, and indexes small).
                buffer.removeAll(keepingCapacity: buffer.capacity <= 64 * 1024)
                readIndex = 0
                scanIndex = 0
            }
            if (phase == .lengthBody || phase == .chunkData) && remaining > 0 {
                // Body bytes go straight into the body, skipping the intermediate buffer copy.
                let take = min(remaining, input.count)
                growBody(by: take)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: input[0..<take]))
                remaining -= take
                input = UnsafeRawBufferPointer(rebasing: input[take...])
                if input.isEmpty { return }
            }
        } else if readIndex >= 64 * 1024 {
            buffer.removeSubrange(0..<readIndex)
            scanIndex -= readIndex
            readIndex = 0
        }
        buffer.append(contentsOf: input)
    }

    /// Convenience for tests: appends the bytes of an array.
    mutating func feed(_ bytes: [UInt8]) {
        bytes.withUnsafeBytes { feed($0) }
    }

    // MARK: - Parsing

    /// Advances the state machine as far as the buffered bytes allow.
    mutating func next() -> Event {
        while true {
            switch phase {
            case .failed:
                return .needMoreData
            case .head:
                switch parseHead() {
                case .needMoreData:
                    return .needMoreData
                case .error(let error):
                    return fail(error)
                case .head(let parsed):
                    head = parsed
                    switch parsed.framing {
                    case .none:
                        return complete()
                    case .length(let length):
                        if length > limits.maxBodyBytes { return fail(.bodyTooLarge) }
                        remaining = length
                        body = []
                        bodyCeiling = length
                        // The declared length is only a claim: reserve a first slice, grow as bytes arrive.
                        body.reserveCapacity(min(length, Self.initialBodyReservation))
                        phase = .lengthBody
                    case .chunked:
                        body = []
                        bodyCeiling = limits.maxBodyBytes
                        phase = .chunkSize
                    }
                    if parsed.expectContinue && readIndex == buffer.count { return .expectContinue }
                }
            case .lengthBody:
                consumeBody()
                if remaining > 0 { return .needMoreData }
                return complete()
            case .chunkSize:
                switch readLine(limit: Self.maxChunkLineBytes) {
                case .needMoreData:
                    return .needMoreData
                case .tooLong:
                    return fail(.badRequest("A chunk-size line is too long."))
                case .bareLF:
                    return fail(.badRequest("A chunk-size line must end with CRLF, not a bare LF."))
                case .line(let start, let end):
                    switch parseChunkSize(start: start, end: end) {
                    case .failure(let error):
                        return fail(error)
                    case .success(0):
                        trailerBytes = 0
                        trailerFields = 0
                        phase = .trailers
                    case .success(let size):
                        if size > limits.maxBodyBytes - body.count { return fail(.bodyTooLarge) }
                        remaining = size
                        phase = .chunkData
                    }
                }
            case .chunkData:
                consumeBody()
                if remaining > 0 { return .needMoreData }
                phase = .chunkDataEnd
            case .chunkDataEnd:
                let available = buffer.count - readIndex
                if available == 0 { return .needMoreData }
                if buffer[readIndex] == ASCII.lf {
                    return fail(.badRequest("Chunk data must be followed by CRLF, not a bare LF."))
                } else if buffer[readIndex] == ASCII.cr {
                    if available < 2 { return .needMoreData }
                    guard buffer[readIndex + 1] == ASCII.lf else {
                        return fail(.badRequest("Chunk data is not followed by CRLF."))
                    }
                    readIndex += 2
                } else {
                    return fail(.badRequest("Chunk data is longer than its declared size."))
                }
                phase = .chunkSize
            case .trailers:
                let limit = limits.maxHeaderBytes - trailerBytes
                switch readLine(limit: max(limit, 0)) {
                case .needMoreData:
                    return .needMoreData
                case .tooLong:
                    return fail(.headersTooLarge)
                case .bareLF:
                    return fail(.badRequest("A trailer line must end with CRLF, not a bare LF."))
                case .line(let start, let end):
                    if start == end { return complete() }
                    trailerBytes += end - start + 2
                    if trailerBytes > limits.maxHeaderBytes { return fail(.headersTooLarge) }
                    trailerFields += 1
                    if trailerFields > limits.maxHeaderFields { return fail(.tooManyHeaderFields) }
                    // Trailer fields are tolerated and dropped: none of them matters to this server.
                    let valid = buffer.withUnsafeBufferPointer { bytes in
                        !ASCII.isWhitespace(bytes[start])
                            && (start..<end).allSatisfy { ASCII.isFieldValueByte(bytes[$0]) }
                    }
                    if !valid { return fail(.badRequest("Invalid trailer field.")) }
                }
            }
        }
    }

    private mutating func fail(_ error: HTTPParseError) -> Event {
        phase = .failed
        failedPath = head?.path ?? requestLinePath
        head = nil
        body = []
        return .error(error)
    }

    private mutating func complete() -> Event {
        // The force unwrap is safe: every path into complete() sets `head` first.
        let request = HTTPParsedRequest(head: head!, body: body)
        head = nil
        requestLinePath = nil
        requestLineSeen = false
        body = []
        phase = .head
        scanIndex = readIndex
        return .request(request)
    }

    private mutating func consumeBody() {
        let take = min(remaining, buffer.count - readIndex)
        guard take > 0 else { return }
        growBody(by: take)
        body.append(contentsOf: buffer[readIndex..<(readIndex + take)])
        readIndex += take
        remaining -= take
    }

    /// Makes room for `count` more body bytes: double the capacity (amortised appends) but never past the ceiling,
    /// so a claimed length reserves at most about twice what actually arrived, and never more than it claimed.
    private mutating func growBody(by count: Int) {
        let needed = body.count + count
        guard needed > body.capacity else { return }
        body.reserveCapacity(min(max(needed, body.capacity * 2), max(bodyCeiling, needed)))
    }

    private enum LineResult {
        case needMoreData
        case tooLong
        /// The line ended in LF without a CR before it (chunked framing requires CRLF).
        case bareLF
        /// The line's content range, without its CRLF.
        case line(start: Int, end: Int)
    }

    /// Finds the next CRLF-terminated line at `readIndex` and consumes it including its line ending.
    private mutating func readLine(limit: Int) -> LineResult {
        let start = readIndex
        let count = buffer.count
        let found: Int? = buffer.withUnsafeBufferPointer { bytes in
            var index = start
            let stop = min(count, start + limit + 2)
            while index < stop {
                if bytes[index] == ASCII.lf { return index }
                index += 1
            }
            return nil
        }
        guard let lf = found else {
            return count - start > limit + 1 ? .tooLong : .needMoreData
        }
        readIndex = lf + 1
        guard lf > start && buffer[lf - 1] == ASCII.cr else { return .bareLF }
        let end = lf - 1
        if end - start > limit { return .tooLong }
        return .line(start: start, end: end)
    }

    private func parseChunkSize(start: Int, end: Int) -> Result<Int, HTTPParseError> {
        buffer.withUnsafeBufferPointer { bytes in
            var index = start
            var size = 0
            while index < end, let digit = ASCII.hexValue(bytes[index]) {
                if size > (Int.max >> 4) { return .failure(.bodyTooLarge) }
                size = size << 4 | digit
                index += 1
            }
            if index == start { return .failure(.badRequest("Invalid chunk size.")) }
            // chunk-ext: BWS ";" … — tolerated, but only printable characters.
            while index < end && ASCII.isWhitespace(bytes[index]) { index += 1 }
            if index < end {
                guard bytes[index] == ASCII.semicolon else { return .failure(.badRequest("Invalid chunk size.")) }
                while index < end {
                    guard ASCII.isFieldValueByte(bytes[index]) else {
                        return .failure(.badRequest("Invalid chunk extension."))
                    }
                    index += 1
                }
            }
            return .success(size)
        }
    }

    // MARK: - Head

    private enum HeadResult {
        case needMoreData
        case head(HTTPRequestHead)
        case error(HTTPParseError)
    }

    private mutating func parseHead() -> HeadResult {
        let limits = self.limits
        var readIndex = self.readIndex
        var scanIndex = self.scanIndex
        var requestLineSeen = self.requestLineSeen
        var requestLinePath = self.requestLinePath
        let result: HeadResult = buffer.withUnsafeBufferPointer { bytes in
            let count = bytes.count
            // Skip empty lines before the request line.
            while readIndex < count {
                if bytes[readIndex] == ASCII.lf {
                    readIndex += 1
                } else if bytes[readIndex] == ASCII.cr && readIndex + 1 < count && bytes[readIndex + 1] == ASCII.lf {
                    readIndex += 2
                } else {
                    break
                }
            }
            scanIndex = max(scanIndex, readIndex)
            // Find the empty line that ends the header block.
            var end: Int?
            var index = scanIndex
            while index < count {
                if bytes[index] == ASCII.lf && index > readIndex {
                    if !requestLineSeen {
                        // The first line end is the request line's: its path, once (scanned bytes are not rescanned).
                        requestLineSeen = true
                        let end = bytes[index - 1] == ASCII.cr ? index - 1 : index
                        requestLinePath = Self.requestLinePath(bytes, start: readIndex, end: end)
                    }
                    if index + 1 < count && bytes[index + 1] == ASCII.lf {
                        end = index + 2
                        break
                    }
                    if index + 2 < count && bytes[index + 1] == ASCII.cr && bytes[index + 2] == ASCII.lf {
                        end = index + 3
                        break
                    }
                    if index + 2 >= count {
                        break  // Can't tell yet whether an empty line follows: rescan from this LF.
                    }
                }
                index += 1
            }
            scanIndex = index
            guard let end else {
                return count - readIndex > limits.maxHeaderBytes ? .error(.headersTooLarge) : .needMoreData
            }
            if end - readIndex > limits.maxHeaderBytes { return .error(.headersTooLarge) }
            let result = Self.parseHeadBlock(bytes, start: readIndex, end: end, maxFields: limits.maxHeaderFields)
            readIndex = end
            return result
        }
        self.readIndex = readIndex
        self.scanIndex = scanIndex
        self.requestLineSeen = requestLineSeen
        self.requestLinePath = requestLinePath
        return result
    }

    /// Parses a complete header block `bytes[start..<end]`, which ends with an empty line.
    private static func parseHeadBlock(
        _ bytes: UnsafeBufferPointer<UInt8>, start: Int, end: Int, maxFields: Int
    ) -> HeadResult {
        // Split into lines; `lineEnd` excludes the LF and a CR just before it.
        var lineStart = start
        func nextLine() -> (Int, Int)? {
            guard lineStart < end else { return nil }
            var lf = lineStart
            while bytes[lf] != ASCII.lf { lf += 1 }
            let lineEnd = lf > lineStart && bytes[lf - 1] == ASCII.cr ? lf - 1 : lf
            let line = (lineStart, lineEnd)
            lineStart = lf + 1
            return line
        }
        // The force unwrap is safe: the block holds at least the request line and the empty line.
        let (requestStart, requestEnd) = nextLine()!
        let requestLine: RequestLine
        switch parseRequestLine(bytes, start: requestStart, end: requestEnd) {
        case .success(let line): requestLine = line
        case .failure(let error): return .error(error)
        }

        var headers = HTTPHeaders()
        var contentLength: Int?
        var contentLengthInvalid = false
        var transferEncoding = TransferCodings()
        var sawTransferEncoding = false
        var connectionClose = false
        var connectionKeepAlive = false
        var hostCount = 0
        var expectContinue = false
        var expectOther = false

        var fieldCount = 0
        while let (fieldStart, fieldEnd) = nextLine() {
            if fieldStart == fieldEnd { break }  // The empty line.
            fieldCount += 1
            if fieldCount > maxFields { return .error(.tooManyHeaderFields) }
            if ASCII.isWhitespace(bytes[fieldStart]) {
                return .error(.badRequest("Obsolete line folding is not allowed."))
            }
            var colon = fieldStart
            while colon < fieldEnd && ASCII.isToken(bytes[colon]) { colon += 1 }
            guard colon < fieldEnd, bytes[colon] == ASCII.colon, colon > fieldStart else {
                if colon < fieldEnd && ASCII.isWhitespace(bytes[colon]) {
                    return .error(.badRequest("Whitespace between a header name and the colon is not allowed."))
                }
                return .error(.badRequest("Invalid header line."))
            }
            var valueStart = colon + 1
            var valueEnd = fieldEnd
            while valueStart < valueEnd && ASCII.isWhitespace(bytes[valueStart]) { valueStart += 1 }
            while valueEnd > valueStart && ASCII.isWhitespace(bytes[valueEnd - 1]) { valueEnd -= 1 }
            for index in valueStart..<valueEnd where !ASCII.isFieldValueByte(bytes[index]) {
                return .error(.badRequest("Invalid character in a header value."))
            }
            let name = UnsafeBufferPointer(rebasing: bytes[fieldStart..<colon])
            let value = UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd])

            switch name.count {
            case 4 where ASCII.equalsIgnoringCase(name, "host"):
                hostCount += 1
            case 6 where ASCII.equalsIgnoringCase(name, "expect"):
                if ASCII.equalsIgnoringCase(value, "100-continue") { expectContinue = true } else { expectOther = true }
            case 10 where ASCII.equalsIgnoringCase(name, "connection"):
                forEachListElement(value) { element in
                    if ASCII.equalsIgnoringCase(element, "close") { connectionClose = true }
                    if ASCII.equalsIgnoringCase(element, "keep-alive") { connectionKeepAlive = true }
                }
            case 14 where ASCII.equalsIgnoringCase(name, "content-length"):
                var sawElement = false
                forEachListElement(value) { element in
                    sawElement = true
                    guard let parsed = parseDecimal(element) else {
                        contentLengthInvalid = true
                        return
                    }
                    if let existing = contentLength, existing != parsed { contentLengthInvalid = true }
                    contentLength = parsed
                }
                if !sawElement { contentLengthInvalid = true }
            case 17 where ASCII.equalsIgnoringCase(name, "transfer-encoding"):
                sawTransferEncoding = true
                forEachListElement(value) { transferEncoding.add($0) }
            default:
                break
            }
            headers.add(
                name: String(decoding: name, as: UTF8.self),
                value: String(decoding: value, as: UTF8.self))
        }

        let version = requestLine.version
        let isHTTP11 = version.minor >= 1
        if isHTTP11 && hostCount == 0 { return .error(.badRequest("HTTP/1.1 requests must have a Host header.")) }
        if hostCount > 1 { return .error(.badRequest("A request must not have more than one Host header.")) }
        if contentLengthInvalid { return .error(.badRequest("Invalid Content-Length header.")) }

        var framing = HTTPBodyFraming.none
        if sawTransferEncoding {
            if !isHTTP11 { return .error(.badRequest("Transfer-Encoding is not allowed in HTTP/1.0 requests.")) }
            if contentLength != nil {
                return .error(.badRequest("A request must not have both Content-Length and Transfer-Encoding."))
            }
            switch transferEncoding.verdict() {
            case .success: framing = .chunked
            case .failure(let error): return .error(error)
            }
        } else if let contentLength, contentLength > 0 {
            framing = .length(contentLength)
        }
        if isHTTP11 && expectOther { return .error(.expectationFailed) }

        let keepAlive = isHTTP11 ? !connectionClose : connectionKeepAlive && !connectionClose
        let split = HTTPRequest.splitTarget(bytes: UnsafeBufferPointer(rebasing: bytes[requestLine.target]))
        return .head(
            HTTPRequestHead(
                method: requestLine.method,
                target: String(decoding: UnsafeBufferPointer(rebasing: bytes[requestLine.target]), as: UTF8.self),
                path: split.path,
                query: split.query,
                version: version,
                headers: headers,
                keepAlive: keepAlive,
                framing: framing,
                expectContinue: isHTTP11 && expectContinue && framing != .none
            ))
    }

    private struct RequestLine {
        var method: String
        var target: Range<Int>
        var version: HTTPVersion
    }

    private static func parseRequestLine(_ bytes: UnsafeBufferPointer<UInt8>, start: Int, end: Int)
        -> Result<RequestLine, HTTPParseError>
    {
        var index = start
        while index < end && ASCII.isToken(bytes[index]) { index += 1 }
        guard index > start, index < end, bytes[index] == ASCII.space else {
            return .failure(.badRequest("Invalid request method."))
        }
        let method = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        index += 1
        let targetStart = index
        while index < end && bytes[index] > ASCII.space && bytes[index] != 0x7F { index += 1 }
        let targetEnd = index
        guard targetEnd > targetStart else { return .failure(.badRequest("Invalid request target.")) }
        guard index < end else { return .failure(.badRequest("The request line has no HTTP version.")) }
        guard bytes[index] == ASCII.space else { return .failure(.badRequest("Invalid request target.")) }
        index += 1

        // HTTP-version = "HTTP/" DIGIT "." DIGIT, and nothing after it.
        let versionBytes = UnsafeBufferPointer(rebasing: bytes[index..<end])
        guard versionBytes.count == 8,
            versionBytes[0] == UInt8(ascii: "H"), versionBytes[1] == UInt8(ascii: "T"),
            versionBytes[2] == UInt8(ascii: "T"), versionBytes[3] == UInt8(ascii: "P"),
            versionBytes[4] == ASCII.slash, versionBytes[6] == UInt8(ascii: "."),
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(versionBytes[5]),
            (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(versionBytes[7])
        else {
            return .failure(.badRequest("Invalid HTTP version."))
        }
        let version = HTTPVersion(
            major: Int(versionBytes[5] - UInt8(ascii: "0")), minor: Int(versionBytes[7] - UInt8(ascii: "0")))
        // HTTP/0.9 has no version token at all (handled above); an explicit 0.x is just as malformed.
        guard version.major != 0 else { return .failure(.badRequest("Invalid HTTP version.")) }
        guard version.major == 1 else { return .failure(.versionNotSupported) }

        // origin-form (/path), asterisk-form (*), or absolute-form (http://host/path).
        let target = UnsafeBufferPointer(rebasing: bytes[targetStart..<targetEnd])
        let valid: Bool
        if target[0] == ASCII.slash {
            valid = true
        } else if target.count == 1 && target[0] == UInt8(ascii: "*") {
            valid = method == "OPTIONS"
        } else {
            valid = hasHTTPScheme(target)
        }
        guard valid else { return .failure(.badRequest("Invalid request target.")) }
        return .success(RequestLine(method: method, target: targetStart..<targetEnd, version: version))
    }

    /// The path a request line names, read leniently: the target after the first space, when it is in origin form
    /// (`/path`) or absolute form (`http://host/path`), whatever the method and the version are. A request line the
    /// parser then refuses (a bad method, an unsupported version, junk after it) is answered in the envelope of the
    /// endpoint it was for.
    private static func requestLinePath(_ bytes: UnsafeBufferPointer<UInt8>, start: Int, end: Int) -> String? {
        var index = start
        while index < end && bytes[index] != ASCII.space { index += 1 }
        index += 1
        let targetStart = index
        while index < end && bytes[index] > ASCII.space && bytes[index] != 0x7F { index += 1 }
        guard index > targetStart else { return nil }
        let target = UnsafeBufferPointer(rebasing: bytes[targetStart..<index])
        guard target[0] == ASCII.slash || hasHTTPScheme(target) else { return nil }
        return HTTPRequest.splitTarget(bytes: target).path
    }

    private static func hasHTTPScheme(_ target: UnsafeBufferPointer<UInt8>) -> Bool {
        for scheme: StaticString in ["http://", "https://"] {
            let length = scheme.utf8CodeUnitCount
            if target.count > length,
                ASCII.equalsIgnoringCase(UnsafeBufferPointer(rebasing: target[0..<length]), scheme)
            {
                return true
            }
        }
        return false
    }

    /// Calls `body` with each non-empty element of a comma-separated list, trimmed of whitespace.
    private static func forEachListElement(
        _ value: UnsafeBufferPointer<UInt8>,
        _ body: (UnsafeBufferPointer<UInt8>) -> Void
    ) {
        var start = 0
        while start <= value.count {
            var end = start
            while end < value.count && value[end] != ASCII.comma { end += 1 }
            var elementStart = start
            var elementEnd = end
            while elementStart < elementEnd && ASCII.isWhitespace(value[elementStart]) { elementStart += 1 }
            while elementEnd > elementStart && ASCII.isWhitespace(value[elementEnd - 1]) { elementEnd -= 1 }
            if elementEnd > elementStart { body(UnsafeBufferPointer(rebasing: value[elementStart..<elementEnd])) }
            start = end + 1
        }
    }

    /// Parses `1*DIGIT`; values beyond `Int.max` saturate (and are then rejected as too large, not malformed).
    private static func parseDecimal(_ bytes: UnsafeBufferPointer<UInt8>) -> Int? {
        guard !bytes.isEmpty else { return nil }
        var value = 0
        for byte in bytes {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            let (times10, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times10.addingReportingOverflow(Int(byte - UInt8(ascii: "0")))
            value = overflow1 || overflow2 ? Int.max : sum
        }
        return value
    }

    /// Accumulates `Transfer-Encoding` codings across field lines and judges them.
    private struct TransferCodings {
        var chunkedCount = 0
        var lastIsChunked = false
        var hasOther = false
        var isEmpty = true

        mutating func add(_ coding: UnsafeBufferPointer<UInt8>) {
            isEmpty = false
            if ASCII.equalsIgnoringCase(coding, "chunked") {
                chunkedCount += 1
                lastIsChunked = true
            } else {
                hasOther = true
                lastIsChunked = false
            }
        }

        func verdict() -> Result<Void, HTTPParseError> {
            if isEmpty { return .failure(.badRequest("Empty Transfer-Encoding header.")) }
            if chunkedCount > 1 { return .failure(.badRequest("chunked must be applied only once.")) }
            if chunkedCount == 1 && !lastIsChunked {
                return .failure(.badRequest("chunked must be the final transfer coding."))
            }
            if hasOther { return .failure(.notImplemented("Only the chunked transfer coding is supported.")) }
            return .success(())
        }
    }
}
