// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMLogging
import Testing

/// Pipelined requests from a client that does not read: complete (non-streamed) answers obey the same high watermark
/// as streams. The server stops parsing, and reading, the connection's next request while more than the high
/// watermark is queued, and goes on once the client has read the queue down below the low watermark.
@Suite struct PipelineBackpressureTests {
    static let requestCount = 600
    static let bodySize = 16 * 1024

    static var configuration: HTTPServer.Configuration {
        var configuration = HTTPServer.Configuration()
        configuration.outboundHighWatermark = 64 * 1024
        configuration.outboundLowWatermark = 16 * 1024
        return configuration
    }

    /// What the handlers saw: how many requests ran, and the connection's largest queue.
    struct Seen: Sendable {
        var handled = 0
        var peakQueued = 0
    }

    /// Answers `/r/N` with a body that starts with `N` and is `bodySize` long: in the handler's synchronous start
    /// (as afmd answers `/status`), or from its task.
    static func server(answerInStart: Bool, seen: Recorder<Seen>) -> HTTPServer {
        HTTPServer(
            configuration: configuration, logger: Logger(label: "test.http", level: .error, sink: LogSink(capturing: ()))
        ) { request, writer in
            var body = Array(request.path.dropFirst(3).utf8) + Array(" ".utf8)
            body += [UInt8](repeating: UInt8(ascii: "x"), count: bodySize - body.count)
            let answer = body
            @Sendable func record() {
                let peak = writer.peakBufferedByteCount
                seen.update {
                    $0.handled += 1
                    $0.peakQueued = max($0.peakQueued, peak)
                }
            }
            if answerInStart {
                try? writer.respondNow(HTTPResponseHead(status: 200), body: answer)
                record()
                return .answered
            }
            return .continueAsync {
                try? await writer.respond(HTTPResponseHead(status: 200), body: answer)
                record()
            }
        }
    }

    @Test(arguments: [true, false])
    func pipelinedAnswersToAClientThatDoesNotReadStayBounded(answerInStart: Bool) async throws {
        let seen = Recorder(Seen())
        let server = Self.server(answerInStart: answerInStart, seen: seen)
        let port = try server.start(host: "127.0.0.1", port: 0)
        defer { server.stopListening() }
        let client = try TestClient(port: port)
        // Small next to what the kernel grows a reader's buffer to (MiBs), yet above the loopback MSS (64 KiB): a
        // window below one segment makes TCP's silly-window avoidance crawl on persist-timer probes once reading starts.
        try client.descriptor.setReceiveBufferSize(128 * 1024)
        var pipeline = ""
        for index in 0..<Self.requestCount { pipeline += "GET /r/\(index) HTTP/1.1\r\nHost: t\r\n\r\n" }
        try await client.send(pipeline)

        // Not reading: the server must stop taking requests once its queue is full, long before the last one.
        var last = -1
        var stableSince = ContinuousClock.now
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now - stableSince < .milliseconds(400) && ContinuousClock.now < deadline {
            let now = seen.value.handled
            if now != last {
                last = now
                stableSince = ContinuousClock.now
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let stalled = seen.value
        // The queue may pass the high watermark by one answer (its head included), never by more.
        let bound = Self.configuration.outboundHighWatermark + Self.bodySize + 1024
        #expect(stalled.peakQueued <= bound, "queued \(stalled.peakQueued) bytes for a client that does not read")
        #expect(stalled.handled < Self.requestCount, "every request was handled although nobody read the answers")

        // Now read: every answer arrives, in order, none lost, and the queue stayed bounded throughout.
        for index in 0..<Self.requestCount {
            let response = try await client.readResponse(timeout: .seconds(30))
            #expect(response.status == 200)
            #expect(response.body.count == Self.bodySize)
            let label = response.bodyText.prefix { $0 != " " }
            guard label == "\(index)" else {
                Issue.record("answer \(index) arrived as \(label)")
                return
            }
        }
        #expect(seen.value.handled == Self.requestCount)
        #expect(seen.value.peakQueued <= bound)
        // The connection stays usable afterwards.
        try await client.send("GET /r/last HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await client.readResponse().bodyText.hasPrefix("last "))
    }
}
