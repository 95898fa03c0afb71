// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

@Suite struct DisconnectTests {
    private struct Observed: Sendable {
        var started: ContinuousClock.Instant?
        var cancelled: ContinuousClock.Instant?
        var writeError: HTTPWriteError?
        var closedAfterCancel = false
    }

    /// A handler that waits (like a generation) until cancelled, then tries to write.
    private func waitingHandler(_ observed: Recorder<Observed>) -> HTTPHandler {
        { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            observed.update { $0.started = .now }
            await withTaskCancellationHandler {
                try? await Task.sleep(for: .seconds(60))
            } onCancel: {
                observed.update { $0.cancelled = .now }
            }
            let closed = writer.isClosed
            do throws(HTTPWriteError) {
                try await writer.write(Array("late".utf8))
            } catch {
                observed.update {
                    $0.writeError = error
                    $0.closedAfterCancel = closed
                }
            }
        }
    }

    @Test(arguments: [false, true])
    func clientDisconnectCancelsHandlerPromptly(reset: Bool) async throws {
        let observed = Recorder(Observed())
        try await withTestServer(handler: waitingHandler(observed)) { server, port in
            let client = try TestClient(port: port)
            try await client.send("POST /v1/responses HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\n{}")
            _ = try await client.readUntil(Array("\r\n\r\n".utf8))
            #expect(try await eventually { observed.value.started != nil })
            let closedAt = ContinuousClock.now
            if reset { client.reset() } else { client.close() }
            #expect(try await eventually { observed.value.writeError != nil })
            let cancelledAt = try #require(observed.value.cancelled)
            #expect(cancelledAt - closedAt < .milliseconds(100), "cancellation took \(cancelledAt - closedAt)")
            #expect(observed.value.writeError == .connectionClosed)
            #expect(observed.value.closedAfterCancel)
            #expect(try await eventually { server.activeConnectionCount == 0 })
        }
    }

    @Test func disconnectDuringStreamingMakesWritesFail() async throws {
        let failure = Recorder<HTTPWriteError?>(nil)
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            while true {
                do throws(HTTPWriteError) {
                    try await writer.write(Array("tick\n".utf8))
                } catch {
                    failure.update { $0 = error }
                    return
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            _ = try await client.readUntil(Array("tick\n".utf8))
            client.close()
            #expect(try await eventually { failure.value != nil })
            #expect(failure.value == .connectionClosed)
        }
    }

    @Test func disconnectWhileWriterIsBlockedByBackpressureWakesIt() async throws {
        let failure = Recorder<HTTPWriteError?>(nil)
        let handler: HTTPHandler = { _, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200))
            let chunk = [UInt8](repeating: 1, count: 256 * 1024)
            while true {
                do throws(HTTPWriteError) {
                    try await writer.write(chunk)
                } catch {
                    failure.update { $0 = error }
                    return
                }
            }
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            _ = try await client.readBytes(1)
            try await Task.sleep(for: .milliseconds(200))  // Let the kernel buffers fill and the writer block.
            client.reset()
            #expect(try await eventually { failure.value != nil })
            #expect(failure.value == .connectionClosed)
        }
    }
}
