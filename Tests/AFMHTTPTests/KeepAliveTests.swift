// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

@Suite struct KeepAliveTests {
    @Test func answersSimpleRequestWithServerFields() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET /hello?x=1 HTTP/1.1\r\nHost: test\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.headers["X-Method"] == "GET")
            #expect(response.headers["X-Path"] == "/hello")
            #expect(response.headers["X-Query"] == "x=1")
            #expect(response.headers["Content-Length"] == "0")
            #expect(response.headers["Server"] == "afmd")
            #expect(response.headers["Date"]?.hasSuffix(" GMT") == true)
            #expect(response.headers["Connection"] == nil)
        }
    }

    @Test func reusesConnectionForSequentialRequests() async throws {
        try await withTestServer { server, port in
            let client = try TestClient(port: port)
            for index in 0..<5 {
                try await client.send("POST /n HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\n\r\nabc\(index)!")
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.bodyText == "abc\(index)!")
            }
            #expect(server.activeConnectionCount == 1)
        }
    }

    @Test func honoursConnectionClose() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.headers["Connection"] == "close")
            #expect(try await client.waitForEOF())
        }
    }

    @Test func closesHTTP10ByDefault() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.0\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.headers["Connection"] == "close")
            #expect(try await client.waitForEOF())
        }
    }

    @Test func keepsHTTP10AliveWhenAsked() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            for _ in 0..<2 {
                try await client.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let response = try await client.readResponse()
                #expect(response.status == 200)
                #expect(response.headers["Connection"] == "keep-alive")
            }
        }
    }

    @Test func answersPipelinedRequestsInOrder() async throws {
        // The first handler is the slowest, so out-of-order processing would show.
        let handler: HTTPHandler = { request, writer in
            let delay = ["/1": 60, "/2": 20, "/3": 0][request.path] ?? 0
            try? await Task.sleep(for: .milliseconds(delay))
            try? await writer.respond(HTTPResponseHead(status: 200), body: Array(request.path.utf8))
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                "GET /1 HTTP/1.1\r\nHost: t\r\n\r\nGET /2 HTTP/1.1\r\nHost: t\r\n\r\nGET /3 HTTP/1.1\r\nHost: t\r\n\r\n"
            )
            var bodies: [String] = []
            for _ in 0..<3 { bodies.append(try await client.readResponse().bodyText) }
            #expect(bodies == ["/1", "/2", "/3"])
        }
    }

    @Test func pipelinedPostBodiesStayWithTheirRequests() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                "POST /a HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\nAAA"
                    + "POST /b HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nBB\r\n0\r\n\r\n"
                    + "GET /c HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            let first = try await client.readResponse()
            let second = try await client.readResponse()
            let third = try await client.readResponse()
            #expect(first.bodyText == "AAA")
            #expect(second.bodyText == "BB")
            #expect(third.headers["X-Path"] == "/c")
            #expect(try await client.waitForEOF())
        }
    }

    @Test func headResponseHasLengthButNoBody() async throws {
        let handler: HTTPHandler = { _, writer in
            try? await writer.respond(HTTPResponseHead(status: 200), body: Array("twelve bytes".utf8))
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("HEAD / HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let head = try await client.readResponse(headRequest: true)
            #expect(head.headers["Content-Length"] == "12")
            let get = try await client.readResponse()
            #expect(get.bodyText == "twelve bytes")
        }
    }

    @Test func handlerWithoutResponseGets500Envelope() async throws {
        try await withTestServer(handler: { _, _ in }) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 500)
            #expect(response.headers["Content-Type"] == "application/json")
            #expect(response.bodyText.contains(#""code":"internal""#))
            #expect(!response.bodyText.contains("handler"))
        }
    }

    /// The fallback 500 of a handler that returned without responding is rendered by `errorBody` for the request's
    /// path, like every other error the server raises itself (the daemon's per-dialect envelopes: Anthropic's on
    /// `/v1/messages`); it was always the default envelope.
    @Test func handlerWithoutResponseGetsThePathsErrorBody() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.errorBody = { path, status, code, message in
            guard path == "/v1/messages" else { return nil }
            return Array(#"{"type":"error","error":{"type":"api_error","message":"\#(status) \#(code): \#(message)"}}"#.utf8)
        }
        try await withTestServer(configuration: configuration, handler: { _, _ in }) { _, port in
            let client = try TestClient(port: port)
            try await client.send("POST /v1/messages?beta=true HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 500)
            #expect(response.bodyText.hasPrefix(#"{"type":"error","error":{"type":"api_error","message":"500 internal: "#), "\(response.bodyText)")
            let other = try TestClient(port: port)
            try await other.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let fallback = try await other.readResponse()
            #expect(fallback.status == 500)
            #expect(fallback.bodyText.contains(#""code":"internal""#))
        }
    }

    @Test func secondRespondIsInvalidState() async throws {
        let outcome = Recorder<HTTPWriteError?>(nil)
        let handler: HTTPHandler = { _, writer in
            try? await writer.respond(HTTPResponseHead(status: 200), body: [])
            do throws(HTTPWriteError) {
                try await writer.respond(HTTPResponseHead(status: 200), body: [])
            } catch {
                outcome.update { $0 = error }
            }
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await client.readResponse().status == 200)
            #expect(try await eventually { outcome.value != nil })
            if case .invalidState = outcome.value {
            } else {
                Issue.record("expected invalidState, got \(String(describing: outcome.value))")
            }
        }
    }

    @Test func handlerRequestedCloseClosesAfterResponse() async throws {
        let handler: HTTPHandler = { _, writer in
            try? await writer.respond(HTTPResponseHead(status: 200, headers: ["Connection": "close"]), body: [1, 2])
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.headers.values(for: "Connection") == ["close"])
            #expect(response.body == [1, 2])
            #expect(try await client.waitForEOF())
        }
    }

    @Test func noContentHasNeitherBodyNorLength() async throws {
        let handler: HTTPHandler = { _, writer in
            try? await writer.respond(HTTPResponseHead(status: 204), body: Array("ignored".utf8))
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("DELETE /x HTTP/1.1\r\nHost: t\r\n\r\nGET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let first = try await client.readResponse()
            #expect(first.status == 204)
            #expect(first.headers["Content-Length"] == nil)
            #expect(try await client.readResponse().status == 204)  // The next response starts right after.
        }
    }

    @Test func readsLargeContentLengthBody() async throws {
        let payload = (0..<(3 * 1024 * 1024)).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                Array("PUT /big HTTP/1.1\r\nHost: t\r\nContent-Length: \(payload.count)\r\n\r\n".utf8))
            try await client.send(payload)
            let response = try await client.readResponse()
            #expect(response.headers["X-Body-Length"] == "\(payload.count)")
            #expect(response.body == payload)
        }
    }
}
