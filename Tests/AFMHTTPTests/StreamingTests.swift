// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

@Suite struct StreamingTests {
    @Test func streamsChunkedResponse() async throws {
        let handler: HTTPHandler = { _, writer in
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: "text/event-stream")
            headers.add(name: "Content-Length", value: "999")  // Dropped: the server owns framing fields.
            try? await writer.startStream(HTTPResponseHead(status: 200, headers: headers))
            for index in 0..<5 {
                try? await writer.write(Array("data: \(index)\n\n".utf8))
                try? await writer.write([])  // Ignored; must not end the stream early.
            }
            try? await writer.finishStream()
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET /events HTTP/1.1\r\nHost: t\r\n\r\nGET /events HTTP/1.1\r\nHost: t\r\n\r\n")
            for _ in 0..<2 {  // Keep-alive works after a chunked response.
                let response = try await client.readResponse()
                #expect(response.chunked)
                #expect(response.headers["Content-Length"] == nil)
                #expect(response.headers["Content-Type"] == "text/event-stream")
                #expect(response.bodyText == (0..<5).map { "data: \($0)\n\n" }.joined())
            }
        }
    }

    @Test func streamsCloseDelimitedBodyToHTTP10Client() async throws {
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            try? await writer.write(Array("one ".utf8))
            try? await writer.write(Array("two".utf8))
            try? await writer.finishStream()
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            let response = try await client.readResponse()
            #expect(!response.chunked)
            #expect(response.headers["Transfer-Encoding"] == nil)
            #expect(response.headers["Connection"] == "close")
            #expect(response.bodyText == "one two")
        }
    }

    @Test func rejectsWriteWithoutStream() async throws {
        let outcome = Recorder<[HTTPWriteError]>([])
        let handler: HTTPHandler = { _, writer in
            do throws(HTTPWriteError) { try await writer.write([1]) } catch { outcome.update { $0.append(error) } }
            do throws(HTTPWriteError) { try await writer.finishStream() } catch { outcome.update { $0.append(error) } }
            try? await writer.respond(HTTPResponseHead(status: 201), body: [])
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await client.readResponse().status == 201)
            #expect(outcome.value.count == 2)
            #expect(outcome.value.allSatisfy { if case .invalidState = $0 { true } else { false } })
        }
    }

    @Test func rejectsHeaderValueWithLineBreak() async throws {
        let outcome = Recorder<HTTPWriteError?>(nil)
        let handler: HTTPHandler = { _, writer in
            do throws(HTTPWriteError) {
                try await writer.respond(
                    HTTPResponseHead(status: 200, headers: ["X-Evil": "a\r\nSet-Cookie: x"]), body: [])
            } catch {
                outcome.update { $0 = error }
            }
            try? await writer.respond(HTTPResponseHead(status: 202), body: [])
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.status == 202)
            #expect(response.headers["Set-Cookie"] == nil)
            if case .invalidState = outcome.value {} else { Issue.record("expected invalidState") }
        }
    }

    @Test func writerIsUsableFromAnotherTask() async throws {
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            await withTaskGroup(of: Void.self) { group in
                group.addTask { try? await writer.write(Array("from child".utf8)) }
            }
            try? await writer.finishStream()
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await client.readResponse().bodyText == "from child")
        }
    }

    /// A client that stops reading while the handler streams 50 MiB: `write` must suspend, the server's own
    /// buffer must stay within the high watermark plus one write, and everything arrives once the client
    /// reads again.
    @Test func slowReaderGetsBackpressure() async throws {
        let total = 50 * 1024 * 1024
        let piece = 64 * 1024
        let configuration = HTTPServer.Configuration()
        struct Progress: Sendable {
            var written = 0
            var maxBuffered = 0
            var peak = 0
            var finished = false
        }
        let progress = Recorder(Progress())
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            let chunk = [UInt8](repeating: UInt8(ascii: "x"), count: piece)
            var written = 0
            while written < total {
                do throws(HTTPWriteError) {
                    try await writer.write(chunk)
                } catch {
                    return
                }
                written += piece
                let buffered = writer.bufferedByteCount
                let peak = writer.peakBufferedByteCount
                let soFar = written
                progress.update {
                    $0.written = soFar
                    $0.maxBuffered = max($0.maxBuffered, buffered)
                    $0.peak = peak
                }
            }
            try? await writer.finishStream()
            progress.update { $0.finished = true }
        }
        try await withTestServer(configuration: configuration, handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET /big HTTP/1.1\r\nHost: t\r\n\r\n")
            // Not reading: progress must stop well short of 50 MiB (kernel buffers hold a few MiB at most).
            var last = -1
            var stableSince = ContinuousClock.now
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now - stableSince < .milliseconds(300) {
                #expect(ContinuousClock.now < deadline, "the handler never stalled")
                if ContinuousClock.now >= deadline { return }
                let now = progress.value.written
                if now != last {
                    last = now
                    stableSince = ContinuousClock.now
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let stalled = progress.value
            #expect(stalled.written < total / 2)
            #expect(!stalled.finished)
            let bound = configuration.outboundHighWatermark + piece + 32
            #expect(stalled.peak <= bound)
            #expect(stalled.maxBuffered <= bound)

            // Now read everything.
            let response = try await client.readResponse(timeout: .seconds(60))
            #expect(response.body.count == total)
            #expect(response.body.allSatisfy { $0 == UInt8(ascii: "x") })
            #expect(try await eventually { progress.value.finished })
            #expect(progress.value.peak <= bound)
        }
    }
}
