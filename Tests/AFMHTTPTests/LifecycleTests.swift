// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMLogging
import AFMSystem
import Testing

@Suite struct LifecycleTests {
    private func makeServer(
        configuration: HTTPServer.Configuration = .init(),
        handler: @escaping HTTPHandler = echoHandler
    ) -> HTTPServer {
        HTTPServer(
            configuration: configuration,
            logger: Logger(label: "test.http", level: .error, sink: LogSink(capturing: ())),
            handler: handler)
    }

    private func connectionRefused(port: Int) -> Bool {
        do {
            _ = try TestClient(port: port)
            return false
        } catch let error as SystemCallError {
            return error.errno == .connectionRefused
        } catch {
            return false
        }
    }

    @Test func stopListeningClosesEverythingAtOnce() async throws {
        let cancelled = Recorder(false)
        let started = Recorder(false)
        let handler: HTTPHandler = { request, writer in
            if request.path == "/slow" {
                started.update { $0 = true }
                await withTaskCancellationHandler {
                    try? await Task.sleep(for: .seconds(60))
                } onCancel: {
                    cancelled.update { $0 = true }
                }
            }
            try? await writer.respond(HTTPResponseHead(status: 200), body: [])
        }
        let server = makeServer(handler: handler)
        let port = try server.start(host: "127.0.0.1", port: 0)
        #expect(server.localPort == port)
        let idle = try TestClient(port: port)
        try await idle.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await idle.readResponse().status == 200)
        let busy = try TestClient(port: port)
        try await busy.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await eventually { started.value })
        #expect(server.activeConnectionCount == 2)

        server.stopListening()
        #expect(connectionRefused(port: port))
        #expect(server.localPort == nil)
        #expect(server.activeConnectionCount == 0)
        #expect(try await idle.waitForEOF(timeout: .seconds(5)))
        #expect(try await busy.waitForEOF(timeout: .seconds(5)))
        #expect(try await eventually { cancelled.value })

        // It can start again, even on the same port.
        let again = try server.start(host: "127.0.0.1", port: port)
        #expect(again == port)
        let client = try TestClient(port: port)
        try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await client.readResponse().status == 200)
        server.stopListening()
    }

    /// A listener passed in (systemd's socket activation) is shared with the process that made it: stopping, and a
    /// graceful shutdown, close this server's descriptor but never shut the socket down, so it keeps listening for
    /// its other holder and a new connection waits in its queue. Before, `shutdown(2)` ended its listening state for
    /// systemd too and every later connection was refused.
    @Test func anAdoptedListenerIsClosedButNotShutDown() async throws {
        let held = try FileDescriptor.makeTCPListener(address: try #require(SocketAddress(host: "127.0.0.1", port: 0)))
        defer { held.close() }
        let port = try held.localAddress().port
        let server = makeServer()
        #expect(try server.start(adopting: try held.duplicate(), name: "test socket") == port)
        let client = try TestClient(port: port)
        try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await client.readResponse().status == 200)
        server.stopListening()
        #expect(try await client.waitForEOF(timeout: .seconds(5)))
        #expect(!connectionRefused(port: port), "the socket stopped listening for its other holder")

        // Started again on another copy, then shut down gracefully: the same.
        #expect(try server.start(adopting: try held.duplicate(), name: "test socket") == port)
        let again = try TestClient(port: port)
        try await again.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await again.readResponse().status == 200)
        await server.shutdown(deadline: .seconds(5))
        #expect(!connectionRefused(port: port), "the socket stopped listening for its other holder")
    }

    @Test func shutdownDrainsInFlightRequests() async throws {
        let slowStarted = Recorder(false)
        // The slow request answers only once the test saw the shutdown begin (a fixed sleep raced with a late start
        // of the shutdown task on a loaded machine, and the answer then rightly kept the connection open).
        let release = Recorder(false)
        let handler: HTTPHandler = { request, writer in
            if request.path == "/slow" {
                slowStarted.update { $0 = true }
                let deadline = ContinuousClock.now + .seconds(10)
                while !release.value && ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
            }
            try? await writer.respond(HTTPResponseHead(status: 200), body: Array(request.path.utf8))
        }
        let server = makeServer(handler: handler)
        let port = try server.start(host: "127.0.0.1", port: 0)
        let idle = try TestClient(port: port)
        try await idle.send("GET /quick HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await idle.readResponse().status == 200)
        let slow = try TestClient(port: port)
        try await slow.send("GET /slow HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await eventually { slowStarted.value })

        let started = ContinuousClock.now
        async let shutdown: Void = server.shutdown(deadline: .seconds(20))
        #expect(try await eventually { connectionRefused(port: port) })
        #expect(try await idle.waitForEOF(timeout: .seconds(5)))  // Idle keep-alive: closed at once.
        release.update { $0 = true }
        let response = try await slow.readResponse()
        #expect(response.status == 200)
        #expect(response.bodyText == "/slow")
        #expect(response.headers["Connection"] == "close")
        #expect(try await slow.waitForEOF())
        await shutdown
        let elapsed = ContinuousClock.now - started
        #expect(elapsed < .seconds(15))
        #expect(server.activeConnectionCount == 0)
    }

    @Test func shutdownCancelsHandlersAfterDeadline() async throws {
        let cancelled = Recorder(false)
        let running = Recorder(false)
        let handler: HTTPHandler = { _, writer in
            running.update { $0 = true }
            await withTaskCancellationHandler {
                try? await Task.sleep(for: .seconds(60))
            } onCancel: {
                cancelled.update { $0 = true }
            }
            try? await writer.respond(HTTPResponseHead(status: 200), body: [])
        }
        let server = makeServer(handler: handler)
        let port = try server.start(host: "127.0.0.1", port: 0)
        let client = try TestClient(port: port)
        try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await eventually { running.value })
        let started = ContinuousClock.now
        await server.shutdown(deadline: .milliseconds(300))
        #expect(ContinuousClock.now - started >= .milliseconds(300))
        #expect(try await eventually { cancelled.value })
        #expect(try await client.waitForEOF())
    }

    @Test func reportsBindFailureClearly() async throws {
        let first = makeServer()
        let port = try first.start(host: "127.0.0.1", port: 0)
        defer { first.stopListening() }
        let second = makeServer()
        #expect {
            try second.start(host: "127.0.0.1", port: port)
        } throws: { error in
            "\(error)" == "cannot listen on 127.0.0.1:\(port): Address already in use"
                && (error as? HTTPServerError)?.code == .cannotListen
        }
        #expect(throws: HTTPServerError.self) { try second.start(host: "not-an-address", port: 0) }
        #expect(throws: HTTPServerError.self) { try first.start(host: "127.0.0.1", port: 0) }  // Already running.
    }

    @Test(arguments: ["::1", "[::1]", "localhost", "0.0.0.0"])
    func listensOnHost(_ host: String) async throws {
        let server = makeServer()
        let port = try server.start(host: host, port: 0)
        defer { server.stopListening() }
        let connectHost = host.contains(":") ? "::1" : "127.0.0.1"
        let client = try TestClient(port: port, host: connectHost)
        try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
        #expect(try await client.readResponse().status == 200)
    }

    @Test func reportsRemoteAddressAndConnectionID() async throws {
        let seen = Recorder<[String]>([])
        let handler: HTTPHandler = { request, writer in
            seen.update { $0.append("\(request.connectionID) \(request.remoteAddress)") }
            try? await writer.respond(HTTPResponseHead(status: 200), body: [])
        }
        try await withTestServer(handler: handler) { _, port in
            let client = try TestClient(port: port)
            let local = try client.descriptor.localAddress()
            for _ in 0..<2 {
                try await client.send("GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                _ = try await client.readResponse()
            }
            #expect(seen.value.count == 2)
            #expect(Set(seen.value).count == 1)
            #expect(seen.value.first?.hasSuffix(" 127.0.0.1:\(local.port)") == true)
        }
    }

}

/// Answers that a loop thread queues for the end of its pass (`HTTPDeferredFlush`) are not lost when the
/// connection closes in the same pass.
@Suite struct DeferredFlushTests {
    @Test func aRequestFollowedByTheClientsFINIsStillAnswered() async throws {
        let server = HTTPServer(
            configuration: .init(), logger: Logger(label: "test.http", level: .error, sink: LogSink(capturing: ()))
        ) { request, writer in
            try? await writer.respond(HTTPResponseHead(status: 200), body: Array("answer to \(request.path)".utf8))
        }
        let port = try server.start(host: "127.0.0.1", port: 0)
        defer { server.stopListening() }
        for round in 0..<20 {
            let client = try TestClient(port: port)
            // Request and FIN in one go: the loop sees both in one pass, answers inline, then the hang-up.
            try await client.send("GET /r\(round) HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            client.shutdownWrite()
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "answer to /r\(round)")
        }
    }
}
