import Testing

// SPDX-License-Identifier: Apache-2.0
@testable import AFMHTTP

/// The parser state machine fed bytes directly, without sockets.
@Suite struct HTTPRequestParserTests {
    private static let limits = HTTPRequestParser.Limits(maxHeaderBytes: 1024, maxBodyBytes: 64)

    /// Feeds `text` in pieces of `step` bytes and collects every event.
    private func events(_ text: String, step: Int = .max, limits: HTTPRequestParser.Limits = limits)
        -> [HTTPRequestParser.Event]
    {
        var parser = HTTPRequestParser(limits: limits)
        let bytes = Array(text.utf8)
        var out: [HTTPRequestParser.Event] = []
        var offset = 0
        while offset < bytes.count {
            let end = min(bytes.count, offset + min(step, bytes.count))
            parser.feed(Array(bytes[offset..<end]))
            offset = end
            loop: while true {
                let event = parser.next()
                switch event {
                case .needMoreData: break loop
                case .error: out.append(event); return out
                default: out.append(event)
                }
            }
        }
        return out
    }

    private func requests(_ text: String, step: Int = .max) -> [HTTPParsedRequest] {
        events(text, step: step).compactMap { if case .request(let request) = $0 { request } else { nil } }
    }

    private func error(_ text: String, limits: HTTPRequestParser.Limits = limits) -> HTTPParseError? {
        for case .error(let error) in events(text, limits: limits) { return error }
        return nil
    }

    @Test(arguments: [1, 2, 7, 1000])
    func parsesRequestFedInPieces(step: Int) throws {
        let parsed = requests(
            "POST /v1/responses?stream=true HTTP/1.1\r\nHost: localhost\r\nX-Multi: a\r\nx-multi: b\r\n"
                + "Content-Length: 5\r\n\r\nhello",
            step: step)
        let request = try #require(parsed.first)
        #expect(request.head.method == "POST")
        #expect(request.head.target == "/v1/responses?stream=true")
        #expect(request.head.path == "/v1/responses")
        #expect(request.head.query == "stream=true")
        #expect(request.head.version == .http1_1)
        #expect(request.head.headers["host"] == "localhost")
        #expect(request.head.headers.values(for: "X-MULTI") == ["a", "b"])
        #expect(request.body == Array("hello".utf8))
        #expect(request.head.keepAlive)
    }

    @Test(arguments: [1, 3, 1000])
    func decodesChunkedBodyWithExtensionsAndTrailers(step: Int) throws {
        let parsed = requests(
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: Chunked\r\n\r\n"
                + "5;name=value\r\nhello\r\n1 ; x\r\n \r\nA\r\n0123456789\r\n0\r\nTrailer-A: 1\r\nTrailer-B: 2\r\n\r\n",
            step: step)
        let request = try #require(parsed.first)
        #expect(String(decoding: request.body, as: UTF8.self) == "hello 0123456789")
    }

    @Test func acceptsBareLineFeedsAndLeadingEmptyLines() throws {
        let parsed = requests("\r\n\nGET / HTTP/1.1\nHost: t\n\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(parsed.map(\.head.path) == ["/", "/2"])
    }

    @Test func parsesPipelinedRequestsOneAtATime() {
        let parsed = requests(
            "GET /a HTTP/1.1\r\nHost: t\r\n\r\nPOST /b HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nhi"
                + "GET /c HTTP/1.0\r\n\r\n"
        )
        #expect(parsed.map(\.head.path) == ["/a", "/b", "/c"])
        #expect(parsed.map(\.head.keepAlive) == [true, true, false])
    }

    @Test func acceptsRepeatedIdenticalContentLength() throws {
        let parsed = requests("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 3, 3\r\nContent-Length: 3\r\n\r\nabc")
        #expect(parsed.first?.body == Array("abc".utf8))
    }

    @Test func absoluteFormTargetYieldsPath() throws {
        let request = try #require(
            requests("GET http://example.com/p/q?z=1 HTTP/1.1\r\nHost: example.com\r\n\r\n").first)
        #expect(request.head.path == "/p/q")
        #expect(request.head.query == "z=1")
    }

    @Test func connectionFieldDecidesKeepAlive() {
        let parsed = requests(
            "GET / HTTP/1.1\r\nHost: t\r\nConnection: Keep-Alive, Close\r\n\r\n"
                + "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"
        )
        #expect(parsed.map(\.head.keepAlive) == [false, true])
    }

    @Test func signalsExpectContinueBeforeBody() {
        let result = events("POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n")
        guard case .expectContinue = result.first else {
            Issue.record("expected expectContinue, got \(result)")
            return
        }
        #expect(result.count == 1)
    }

    @Test func noContinueWhenBodyAlreadyArrived() {
        let result = events("POST / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok")
        guard result.count == 1, case .request = result[0] else {
            Issue.record("expected only the request, got \(result)")
            return
        }
    }

    @Test func rejectsOversizedHeadBeforeItEnds() {
        let head = "GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + String(repeating: "a", count: 2000)
        #expect(error(head)?.status == 431)
    }

    @Test func rejectsContentLengthAboveLimitBeforeBody() {
        #expect(error("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 65\r\n\r\n")?.status == 413)
        #expect(error("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 64\r\n\r\n") == nil)
    }

    /// A declared `Content-Length` is only a claim: the body buffer grows with the bytes that arrive, never to the
    /// declared size before them (16 MiB per connection for a head alone otherwise).
    @Test func aDeclaredLengthReservesNoMoreThanAFirstSliceBeforeTheBodyArrives() throws {
        let declared = 16 * 1024 * 1024
        var parser = HTTPRequestParser(limits: .init(maxHeaderBytes: 1024, maxBodyBytes: declared))
        parser.feed(Array("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: \(declared)\r\n\r\n".utf8))
        guard case .needMoreData = parser.next() else {
            Issue.record("the head alone must not complete a request")
            return
        }
        // (The allocator may round a reservation up by a few bytes.)
        #expect(parser.reservedBodyCapacity <= HTTPRequestParser.initialBodyReservation + 1024)
        // Arriving bytes grow it geometrically, capped at the declared size; the body comes out intact.
        let piece = [UInt8](repeating: UInt8(ascii: "b"), count: 256 * 1024)
        var fed = 0
        var capacities: [Int] = []
        while fed < declared {
            parser.feed(piece)
            fed += piece.count
            capacities.append(parser.reservedBodyCapacity)
        }
        #expect(try #require(capacities.first) < declared)
        // The allocator may round the last growth up by a few KiB.
        #expect(capacities.allSatisfy { $0 <= declared + 16 * 1024 })
        guard case .request(let request) = parser.next() else {
            Issue.record("the complete body must complete the request")
            return
        }
        #expect(request.body.count == declared)
        #expect(request.body.allSatisfy { $0 == UInt8(ascii: "b") })
    }

    @Test func rejectsChunkedBodyCrossingLimit() {
        let text =
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n20\r\n" + String(repeating: "x", count: 32)
            + "\r\n21\r\n"
        #expect(error(text)?.status == 413)
    }

    @Test func rejectsOversizedTrailers() {
        let text =
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX: "
            + String(repeating: "t", count: 2000) + "\r\n\r\n"
        #expect(error(text)?.status == 431)
    }

    @Test func countsHeaderFieldLinesAgainstTheirLimit() throws {
        let limits = HTTPRequestParser.Limits(maxHeaderBytes: 64 * 1024, maxBodyBytes: 64, maxHeaderFields: 100)
        func fields(_ count: Int) -> String {
            // Host is one of the fields: `count` field lines in all.
            "GET / HTTP/1.1\r\nHost: t\r\n" + (1..<count).map { "x\($0): v\r\n" }.joined() + "\r\n"
        }
        #expect(error(fields(100), limits: limits) == nil)
        let tooMany = try #require(error(fields(101), limits: limits))
        #expect(tooMany.status == 431)
        #expect(tooMany.code == "headers_too_large")
        #expect(tooMany.message.contains("too many header fields"))
        // Trailers have their own count with the same limit.
        func trailers(_ count: Int) -> String { (0..<count).map { "t\($0): v\r\n" }.joined() + "\r\n" }
        let chunked = "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n"
        #expect(error(chunked + trailers(101), limits: limits)?.status == 431)
        #expect(error(chunked + trailers(100), limits: limits) == nil)
    }

    @Test(arguments: MalformedCase.all)
    func rejectsMalformedRequestWithoutSockets(_ testCase: MalformedCase) {
        let bytes = testCase.raw.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }
        var parser = HTTPRequestParser(limits: .init(maxHeaderBytes: 64 * 1024, maxBodyBytes: 16 * 1024 * 1024))
        parser.feed(bytes)
        var found: HTTPParseError?
        for _ in 0..<4 {
            if case .error(let error) = parser.next() {
                found = error
                break
            }
        }
        #expect(found?.status == testCase.status)
        #expect(found?.code == testCase.code)
        #expect(parser.isFailed)
    }

    @Test func formatsHTTPDates() {
        #expect(
            String(decoding: HTTPResponseEncoder.httpDate(unixSeconds: 784_111_777), as: UTF8.self)
                == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(
            String(decoding: HTTPResponseEncoder.httpDate(unixSeconds: 0), as: UTF8.self)
                == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(
            String(decoding: HTTPResponseEncoder.httpDate(unixSeconds: 1_709_210_096), as: UTF8.self)
                == "Thu, 29 Feb 2024 12:34:56 GMT")
    }

    @Test func escapesErrorBodies() {
        let body = HTTPErrorBody.json(message: "a \"quoted\"\n\\ \u{01}", type: "t", code: "c", param: "p")
        #expect(
            String(decoding: body, as: UTF8.self)
                == #"{"error":{"message":"a \"quoted\"\n\\ \u0001","type":"t","param":"p","code":"c"}}"#)
    }

    @Test func headersAreCaseInsensitiveAndOrdered() {
        var headers: HTTPHeaders = ["Content-Type": "a", "X-A": "1"]
        headers.add(name: "x-a", value: "2")
        #expect(headers["CONTENT-TYPE"] == "a")
        #expect(headers.values(for: "x-A") == ["1", "2"])
        headers.replaceOrAdd(name: "X-a", value: "3")
        #expect(headers.map(\.name) == ["Content-Type", "X-a"])
        #expect(headers["x-a"] == "3")
        headers.replaceOrAdd(name: "New", value: "n")
        #expect(headers.count == 3)
        headers.remove(name: "new")
        #expect(!headers.contains(name: "New"))
    }

    /// The path is known from the request line on, before the header block is complete: a 431 (or a 408 while
    /// the headers trickle in) can be answered in the envelope of the endpoint it was sent to. The next request
    /// on the connection starts without it.
    @Test func thePathIsKnownOnceTheRequestLineIsComplete() {
        var parser = HTTPRequestParser(limits: Self.limits)
        parser.feed(Array("GET /a?x=1 HTTP/1.1\r\nHost: t\r\n\r\nPOST /v1/mess".utf8))
        guard case .request(let first) = parser.next() else { Issue.record("no first request"); return }
        #expect(first.head.path == "/a")
        #expect(Self.needsMoreData(parser.next()))
        #expect(parser.pendingPath == nil)
        // Byte by byte: the path appears with the request line's end, and is parsed once.
        for byte in "ages?beta=true HTTP/1.1\r".utf8 { parser.feed([byte]) }
        #expect(Self.needsMoreData(parser.next()))
        #expect(parser.pendingPath == nil)
        parser.feed(Array("\nHost: t\r\nX-Big: ".utf8))
        #expect(Self.needsMoreData(parser.next()))
        #expect(parser.pendingPath == "/v1/messages")
        parser.feed(Array(String(repeating: "a", count: 2048).utf8))
        guard case .error(let error) = parser.next() else { Issue.record("no error"); return }
        #expect(error.status == 431)
        #expect(parser.failedPath == "/v1/messages")
    }

    private static func needsMoreData(_ event: HTTPRequestParser.Event) -> Bool {
        if case .needMoreData = event { true } else { false }
    }
}
