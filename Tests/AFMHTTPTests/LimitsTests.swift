// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Dispatch
import Testing

@Suite struct LimitsTests {
    @Test func rejectsOversizedHeaderBlockWith431() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            // Never terminated: the server must answer once the limit is crossed, not wait for the end.
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\nX-Big: " + String(repeating: "a", count: 70 * 1024))
            let response = try await client.readResponse()
            #expect(response.status == 431)
            #expect(response.headers["Content-Type"] == "application/json")
            #expect(response.bodyText.contains(#""code":"headers_too_large""#))
            #expect(try await client.waitForEOF())
        }
    }

    /// nginx and HAProxy refuse thousands of tiny fields (HAProxy allows 101); each costs this server two strings.
    @Test func rejectsFiveThousandSmallHeaderFieldsWith431() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            let fields = (0..<5000).map { "a\($0):b\r\n" }.joined()
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n" + fields + "\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 431)
            #expect(response.bodyText.contains(#""code":"headers_too_large""#))
            #expect(response.bodyText.contains("too many header fields"))
            #expect(try await client.waitForEOF())
            // A hundred fields are still fine.
            let ordinary = try TestClient(port: port)
            try await ordinary.send("GET / HTTP/1.1\r\nHost: t\r\n" + (1..<100).map { "a\($0):b\r\n" }.joined() + "\r\n")
            #expect(try await ordinary.readResponse().status == 200)
        }
    }

    @Test func acceptsHeaderBlockJustUnderLimit() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.maxHeaderBytes = 4096
        try await withTestServer(configuration: configuration) { _, port in
            let prefix = "GET / HTTP/1.1\r\nHost: t\r\nX-Big: "
            let fill = 4096 - prefix.utf8.count - 4
            let client = try TestClient(port: port)
            try await client.send(prefix + String(repeating: "b", count: fill) + "\r\n\r\n")
            #expect(try await client.readResponse().status == 200)
            try await client.send(prefix + String(repeating: "b", count: fill + 1) + "\r\n\r\n")
            #expect(try await client.readResponse().status == 431)
        }
    }

    @Test func rejectsOversizedContentLengthImmediately() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            // Only the head is sent: a 413 must arrive without the server waiting for 20 MiB of body.
            try await client.send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: \(20 * 1024 * 1024)\r\n\r\n")
            let response = try await client.readResponse(timeout: .seconds(5))
            #expect(response.status == 413)
            #expect(response.headers["Connection"] == "close")
            #expect(response.bodyText.contains(#""code":"request_too_large""#))
            #expect(try await client.waitForEOF())
        }
    }

    @Test func rejectsOversizedBodyWhileClientKeepsSending() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.maxBodyBytes = 1024
        try await withTestServer(configuration: configuration) { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 100000\r\n\r\n" + String(repeating: "z", count: 50_000))
            let response = try await client.readResponse()
            #expect(response.status == 413)
        }
    }

    @Test func rejectsExpectContinueWithOversizedLengthWithoutContinue() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                "PUT / HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: \(17 * 1024 * 1024)\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 413)
            #expect(try await client.waitForEOF())
        }
    }

    @Test func rejectsChunkedBodyAsSoonAsLimitIsCrossed() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.maxBodyBytes = 10_000
        try await withTestServer(configuration: configuration) { _, port in
            let client = try TestClient(port: port)
            try await client.send("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            try await client.send("1388\r\n" + String(repeating: "a", count: 5000) + "\r\n")  // 5,000 bytes: fine.
            try await client.send("1389\r\n")  // 5,001 more would cross 10,000: rejected before the data.
            let response = try await client.readResponse()
            #expect(response.status == 413)
            #expect(response.bodyText.contains(#""code":"request_too_large""#))
        }
    }

    @Test func answers408WhenRequestHeadIsIncomplete() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.requestHeaderTimeout = .milliseconds(300)
        try await withTestServer(configuration: configuration) { _, port in
            let client = try TestClient(port: port)
            let started = ContinuousClock.now
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n")
            let response = try await client.readResponse()
            let elapsed = ContinuousClock.now - started
            #expect(response.status == 408)
            #expect(response.headers["Content-Type"] == "application/json")
            #expect(response.bodyText.contains(#""code":"request_timeout""#))
            #expect(elapsed >= .milliseconds(300))
            #expect(try await client.waitForEOF())
        }
    }

    @Test func answers408WhenNothingArrivesOnNewConnection() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.requestHeaderTimeout = .milliseconds(200)
        try await withTestServer(configuration: configuration) { _, port in
            let client = try TestClient(port: port)
            #expect(try await client.readResponse().status == 408)
        }
    }

    @Test func answers408WhenBodyStalls() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.requestHeaderTimeout = .milliseconds(300)
        try await withTestServer(configuration: configuration) { _, port in
            let client = try TestClient(port: port)
            try await client.send("POST / HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n\r\nabc")
            #expect(try await client.readResponse().status == 408)
        }
    }

    @Test func closesIdleKeepAliveConnectionSilently() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.requestHeaderTimeout = .milliseconds(300)
        try await withTestServer(configuration: configuration) { server, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await client.readResponse().status == 200)
            #expect(try await client.waitForEOF())
            #expect(try await eventually { server.activeConnectionCount == 0 })
        }
    }

    @Test func answers504WhenHandlerMissesDeadline() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.processingDeadline = .milliseconds(300)
        let cancelled = Recorder(false)
        let writeError = Recorder<HTTPWriteError?>(nil)
        let handler: HTTPHandler = { _, writer in
            try? await Task.sleep(for: .seconds(30))
            cancelled.update { $0 = Task.isCancelled }
            do throws(HTTPWriteError) {
                try await writer.respond(HTTPResponseHead(status: 200), body: [])
            } catch {
                writeError.update { $0 = error }
            }
        }
        try await withTestServer(configuration: configuration, handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 504)
            #expect(response.headers["Content-Type"] == "application/json")
            #expect(response.bodyText.contains(#""code":"timeout""#))
            #expect(response.bodyText.contains(#""type":"server_error""#))
            #expect(try await client.waitForEOF())
            #expect(try await eventually { writeError.value != nil })
            #expect(cancelled.value)
            #expect(writeError.value == .connectionClosed)
        }
    }

    @Test func closesStartedStreamWhenHandlerMissesDeadline() async throws {
        var configuration = HTTPServer.Configuration()
        // Long enough that even a sanitizer build starts the stream before it.
        configuration.processingDeadline = .milliseconds(1500)
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            try? await writer.write(Array("partial".utf8))
            try? await Task.sleep(for: .seconds(30))
        }
        try await withTestServer(configuration: configuration, handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let received = String(decoding: try await client.readToEnd(), as: UTF8.self)
            #expect(received.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(received.hasSuffix("7\r\npartial\r\n"))  // No last chunk: the client can tell it was cut.
        }
    }

    /// A handler cancelled by the deadline mid-stream learns why (`processingDeadlinePassed`), may still write its
    /// last words and end the stream within the grace period, and the connection then closes.
    @Test func aStreamCutByTheDeadlineMayStillBeEndedWithinTheGrace() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.processingDeadline = .milliseconds(1500)
        configuration.processingDeadlineGrace = .seconds(5)
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            try? await writer.write(Array("partial".utf8))
            try? await Task.sleep(for: .seconds(30))
            guard writer.processingDeadlinePassed else { return }
            try? await writer.write(Array("timeout".utf8))
            try? await writer.finishStream()
        }
        try await withTestServer(configuration: configuration, handler: handler) { server, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let received = String(decoding: try await client.readToEnd(), as: UTF8.self)
            #expect(received.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(received.hasSuffix("7\r\npartial\r\n7\r\ntimeout\r\n0\r\n\r\n"), "\(received)")
            #expect(try await eventually { server.activeConnectionCount == 0 })
        }
    }

    /// A cancelled handler that does not end its stream within the grace period has its connection closed under it.
    @Test func aStreamNotEndedWithinTheGraceIsCut() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.processingDeadline = .milliseconds(1500)
        configuration.processingDeadlineGrace = .milliseconds(500)
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            try? await writer.write(Array("partial".utf8))
            // Ignores the cancel: waits that cancellation does not end.
            while !writer.isClosed {
                await withCheckedContinuation { continuation in
                    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { continuation.resume() }
                }
            }
        }
        try await withTestServer(configuration: configuration, handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let received = String(decoding: try await client.readToEnd(), as: UTF8.self)
            #expect(received.hasSuffix("7\r\npartial\r\n"))
        }
    }
}
