// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

@Suite struct ConcurrencyTests {
    /// 100 clients at once, each receiving a streamed response while the others stream too.
    @Test func hundredConcurrentStreamingConnections() async throws {
        let handler: HTTPHandler = { request, writer in
            try? await writer.startStream(HTTPResponseHead(status: 200, headers: ["X-Path": request.path]))
            for index in 0..<20 {
                try? await writer.write(Array("\(request.path):\(index);".utf8))
                if index % 5 == 0 { try? await Task.sleep(for: .milliseconds(1)) }
            }
            try? await writer.finishStream()
        }
        try await withTestServer(handler: handler) { server, port in
            try await withThrowingTaskGroup(of: Bool.self) { group in
                for client in 0..<100 {
                    group.addTask {
                        let connection = try TestClient(port: port)
                        try await connection.send("GET /c\(client) HTTP/1.1\r\nHost: t\r\n\r\n")
                        let response = try await connection.readResponse(timeout: .seconds(30))
                        let expected = (0..<20).map { "/c\(client):\($0);" }.joined()
                        return response.status == 200 && response.chunked && response.bodyText == expected
                    }
                }
                var successes = 0
                for try await ok in group where ok { successes += 1 }
                #expect(successes == 100)
            }
            #expect(server.activeConnectionCount <= 100)
        }
    }

    @Test func manyRequestsAcrossSeveralLoops() async throws {
        var configuration = HTTPServer.Configuration()
        configuration.ioThreadCount = 3
        try await withTestServer(configuration: configuration) { _, port in
            try await withThrowingTaskGroup(of: Int.self) { group in
                for client in 0..<12 {
                    group.addTask {
                        let connection = try TestClient(port: port)
                        var ok = 0
                        for index in 0..<20 {
                            let body = "c\(client)-\(index)"
                            try await connection.send(
                                "POST / HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
                            if try await connection.readResponse().bodyText == body { ok += 1 }
                        }
                        return ok
                    }
                }
                var total = 0
                for try await ok in group { total += ok }
                #expect(total == 240)
            }
        }
    }
}
