// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

/// `maxConnections`: one connection too many is answered 503 `busy` and closed; past the refusal headroom the
/// server stops accepting (the kernel's backlog holds the rest) instead of running out of descriptors.
@Suite struct ConnectionLimitTests {
    @Test func refusesAConnectionOverTheLimitWith503AndServesAgainBelowIt() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.maxConnections = 4
        try await withTestServer(configuration: configuration) { server, port in
            var open: [TestClient] = []
            for _ in 0..<4 {
                let client = try TestClient(port: port)
                open.append(client)
            }
            #expect(try await eventually { server.activeConnectionCount == 4 })
            let extra = try TestClient(port: port)
            let response = try await extra.readResponse()
            #expect(response.status == 503)
            #expect(response.headers["Retry-After"] == "1")
            #expect(response.headers["Connection"] == "close")
            #expect(response.bodyText.contains(#""code":"busy""#))
            #expect(try await extra.waitForEOF())
            #expect(server.refusedConnectionCount == 1)
            // The connections under the limit still work.
            try await open[0].send("GET /a HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await open[0].readResponse().status == 200)
            // One closes: a new connection is served.
            open.removeLast().close()
            extra.close()
            #expect(try await eventually { server.activeConnectionCount == 3 })
            let next = try TestClient(port: port)
            try await next.send("GET /b HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await next.readResponse().status == 200)
        }
    }

    @Test func stopsAcceptingWhileTheRefusalHeadroomIsUsedUp() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.maxConnections = 2
        configuration.refusalHeadroom = 2
        configuration.lingerTimeout = .seconds(30)  // Refused connections stay until their clients close them.
        try await withTestServer(configuration: configuration) { server, port in
            let served = [try TestClient(port: port), try TestClient(port: port)]
            #expect(try await eventually { server.activeConnectionCount == 2 })
            var refused: [TestClient] = []
            for _ in 0..<2 {
                let client = try TestClient(port: port)
                #expect(try await client.readResponse().status == 503)
                refused.append(client)
            }
            #expect(server.activeConnectionCount == 4)
            // The kernel completes the handshake, but the server leaves it in the backlog: no answer, no descriptor.
            let waiting = try TestClient(port: port)
            #expect(try await waiting.receivesNothing(for: .milliseconds(400)))
            #expect(server.activeConnectionCount == 4)
            #expect(server.refusedConnectionCount == 2)
            // The refused clients leave: accepting resumes (within a sweep), and the waiting one is refused in turn
            // (two are still served).
            for client in refused { client.close() }
            let response = try await waiting.readResponse(timeout: .seconds(5))
            #expect(response.status == 503)
            #expect(server.refusedConnectionCount == 3)
            withExtendedLifetime(served) {}
        }
    }
}
