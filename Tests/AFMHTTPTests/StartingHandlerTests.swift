// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMLogging
import Testing

/// A handler in two parts (`HTTPStartingHandler`): answers from the synchronous start, rests that run as tasks,
/// large bodies whose start runs off the loop, and pipelined requests mixing both, answered in order.
@Suite struct StartingHandlerTests {
    static func server() -> HTTPServer {
        HTTPServer(logger: Logger(label: "test.http", level: .error, sink: LogSink(capturing: ()))) { request, writer in
            switch request.path {
            case "/now":
                try? writer.respondNow(HTTPResponseHead(status: 200), body: Array("now \(request.body.count)".utf8))
                return .answered
            default:
                return .continueAsync {
                    try? await Task.sleep(for: .milliseconds(20))
                    try? await writer.respond(HTTPResponseHead(status: 200), body: Array("later \(request.body.count)".utf8))
                }
            }
        }
    }

    @Test func answersFromTheStartAndFromTheRestArriveInOrder() async throws {
        let server = Self.server()
        let port = try server.start(host: "127.0.0.1", port: 0)
        defer { server.stopListening() }
        let client = try TestClient(port: port)
        // Pipelined: a late answer first, then immediate ones; each waits for the one before it.
        try await client.send(
            "GET /later HTTP/1.1\r\nHost: t\r\n\r\nGET /now HTTP/1.1\r\nHost: t\r\n\r\nGET /later HTTP/1.1\r\nHost: t\r\n\r\nGET /now HTTP/1.1\r\nHost: t\r\n\r\n")
        var bodies: [String] = []
        for _ in 0..<4 { bodies.append(try await client.readResponse().bodyText) }
        #expect(bodies == ["later 0", "now 0", "later 0", "now 0"])
    }

    /// A body above the loop's inline limit (64 KiB) is handled off the loop, start included.
    @Test func aLargeBodysStartAnswersToo() async throws {
        let server = Self.server()
        let port = try server.start(host: "127.0.0.1", port: 0)
        defer { server.stopListening() }
        let client = try TestClient(port: port)
        let body = String(repeating: "x", count: 100_000)
        for path in ["/now", "/later"] {
            try await client.send("POST \(path) HTTP/1.1\r\nHost: t\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == (path == "/now" ? "now 100000" : "later 100000"))
        }
    }
}
