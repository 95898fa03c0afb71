// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMLogging
import Synchronization

/// Starts a server on 127.0.0.1:0 for one test and stops it afterwards.
func withTestServer<R>(
    configuration: HTTPServer.Configuration = .init(),
    handler: @escaping HTTPHandler = echoHandler,
    _ body: (HTTPServer, Int) async throws -> R
) async throws -> R {
    let server = HTTPServer(
        configuration: configuration, logger: Logger(label: "test.http", level: .error, sink: LogSink(capturing: ())),
        handler: handler)
    let port = try server.start(host: "127.0.0.1", port: 0)
    do {
        let result = try await body(server, port)
        server.stopListening()
        return result
    } catch {
        server.stopListening()
        throw error
    }
}

/// Answers with a JSON-ish summary of the request: method, path, query and body.
let echoHandler: HTTPHandler = { request, writer in
    var headers = HTTPHeaders()
    headers.add(name: "Content-Type", value: "text/plain")
    headers.add(name: "X-Method", value: request.method)
    headers.add(name: "X-Path", value: request.path)
    headers.add(name: "X-Query", value: request.query ?? "-")
    headers.add(name: "X-Body-Length", value: "\(request.body.count)")
    try? await writer.respond(HTTPResponseHead(status: 200, headers: headers), body: request.body)
}

/// A thread-safe box for values that handlers report to the test.
final class Recorder<Value: Sendable>: Sendable {
    private let storage: Mutex<Value>

    init(_ value: Value) { storage = Mutex(value) }

    var value: Value { storage.withLock { $0 } }

    func update<R: Sendable>(_ body: @Sendable (inout Value) -> R) -> R { storage.withLock { body(&$0) } }
}

/// Polls `condition` until it holds or `timeout` passes (generous waits keep loaded CI machines green).
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) async throws -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now >= deadline { return false }
        try await Task.sleep(for: .milliseconds(2))
    }
    return true
}
