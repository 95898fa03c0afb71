// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

/// One malformed request and the status the server must answer with before closing.
struct MalformedCase: Sendable, CustomTestStringConvertible {
    var name: String
    var raw: String
    var status: Int
    var code: String

    init(_ name: String, _ raw: String, _ status: Int = 400, code: String? = nil) {
        self.name = name
        self.raw = raw
        self.status = status
        self.code =
            code
            ?? [
                400: "invalid_request", 413: "request_too_large", 417: "expectation_failed", 431: "headers_too_large",
                501: "not_implemented", 505: "http_version_not_supported",
            ][status]!  // Every status above is listed.
    }

    var testDescription: String { name }

    static let all: [MalformedCase] = [
        // Request line.
        .init("method only", "GET\r\n\r\n"),
        .init("HTTP/0.9 request without version", "GET /\r\nHost: t\r\n\r\n"),
        .init("explicit HTTP/0.9", "GET / HTTP/0.9\r\nHost: t\r\n\r\n"),
        .init("text after version", "GET / HTTP/1.1 extra\r\nHost: t\r\n\r\n"),
        .init("double space before target", "GET  / HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("double space before version", "GET /  HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("tab as separator", "GET\t/ HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("invalid method character", "G@T / HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("lower-case protocol name", "GET / http/1.1\r\nHost: t\r\n\r\n"),
        .init("version without minor", "GET / HTTP/1\r\nHost: t\r\n\r\n"),
        .init("version with trailing garbage", "GET / HTTP/1.1x\r\nHost: t\r\n\r\n"),
        .init("control character in target", "GET /a\u{01}b HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("relative target", "GET a/b HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("asterisk target on GET", "GET * HTTP/1.1\r\nHost: t\r\n\r\n"),
        .init("TLS handshake bytes", "\u{16}\u{03}\u{01}\u{02}\u{00}\u{01}\u{00}\u{01}\u{fc}\u{03}\u{03}\r\n\r\n"),
        .init("HTTP/2.0", "GET / HTTP/2.0\r\nHost: t\r\n\r\n", 505),
        // Header fields.
        .init("missing Host on HTTP/1.1", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"),
        .init("two Host fields", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"),
        .init("field without colon", "GET / HTTP/1.1\r\nHost: t\r\nNoColonHere\r\n\r\n"),
        .init("whitespace before colon", "GET / HTTP/1.1\r\nHost : t\r\n\r\n"),
        .init("invalid field-name character", "GET / HTTP/1.1\r\nHost: t\r\nX(y): 1\r\n\r\n"),
        .init("empty field name", "GET / HTTP/1.1\r\nHost: t\r\n: value\r\n\r\n"),
        .init("obs-fold continuation line", "GET / HTTP/1.1\r\nHost: t\r\nX-A: 1\r\n  continued\r\n\r\n"),
        .init("NUL in field value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\u{00}b\r\n\r\n"),
        .init("bare CR in field value", "GET / HTTP/1.1\r\nHost: t\r\nX-A: a\rb\r\n\r\n"),
        .init("unsupported expectation", "GET / HTTP/1.1\r\nHost: t\r\nExpect: 200-ok\r\n\r\n", 417),
        // Body framing.
        .init("non-numeric Content-Length", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: abc\r\n\r\n"),
        .init("negative Content-Length", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: -1\r\n\r\n"),
        .init("signed Content-Length", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: +5\r\n\r\nhello"),
        .init("empty Content-Length", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: \r\n\r\n"),
        .init(
            "conflicting Content-Length fields",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
        .init("conflicting Content-Length list", "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5, 6\r\n\r\nhello!"),
        .init(
            "Content-Length with Transfer-Encoding",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        .init(
            "chunked applied twice",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n"),
        .init("chunked not last", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n"),
        .init("empty Transfer-Encoding", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: \r\n\r\n"),
        .init("Transfer-Encoding on HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        .init("unknown transfer coding", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip\r\n\r\n", 501),
        .init(
            "gzip before chunked", "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n",
            501),
        .init(
            "invalid chunk size",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nab\r\n0\r\n\r\n"),
        .init(
            "chunk longer than declared",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcdef\r\n0\r\n\r\n"),
        .init(
            "control character in chunk extension",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3;x=\u{01}\r\nabc\r\n0\r\n\r\n"),
        .init(
            "garbage after chunk size",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3 x\r\nabc\r\n0\r\n\r\n"),
        // Chunk lines end with CRLF only: a bare LF there is how a front proxy and this server could disagree on
        // where the body ends (request smuggling), so it is refused rather than tolerated.
        .init(
            "bare LF after chunk size",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\nabc\r\n0\r\n\r\n"),
        .init(
            "bare LF after chunk data",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\n0\r\n\r\n"),
        .init(
            "bare LF after last chunk",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\n\r\n"),
        .init(
            "bare LF ending the trailer section",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\n"),
        .init(
            "bare LF after a trailer field",
            "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\n\r\n"),
        .init(
            "Content-Length beyond Int",
            "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            413),
    ]
}

@Suite struct MalformedRequestTests {
    @Test func tableIsLargeEnough() {
        #expect(MalformedCase.all.count >= 30)
    }

    /// Each case over a real socket: the status, the JSON envelope, `Connection: close`, then end-of-file.
    @Test(arguments: MalformedCase.all)
    func rejectsMalformedRequest(_ testCase: MalformedCase) async throws {
        let handled = Recorder(0)
        let handler: HTTPHandler = { _, writer in
            handled.update { $0 += 1 }
            try? await writer.respond(HTTPResponseHead(status: 200), body: [])
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send(Array(testCase.raw.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }))
            let response = try await client.readResponse()
            #expect(response.status == testCase.status)
            #expect(response.headers["Content-Type"] == "application/json")
            #expect(response.headers["Connection"] == "close")
            #expect(response.bodyText.hasPrefix(#"{"error":{"message":"#))
            #expect(response.bodyText.contains(#""code":"\#(testCase.code)""#))
            #expect(response.bodyText.contains(#""param":null"#))
            #expect(try await client.waitForEOF())
            #expect(handled.value == 0)
        }
    }
}
