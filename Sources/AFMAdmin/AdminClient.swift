// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem

/// An async client of the admin socket; every call uses its own connection, and all socket I/O runs on
/// dedicated threads, never on the cooperative pool.
public struct AdminClient: Sendable {
    /// The socket path.
    public var socketPath: String
    /// How long a single-reply call may take (default 30 s).
    public var timeoutMilliseconds: Int

    /// Creates a client.
    public init(socketPath: String, timeoutMilliseconds: Int = 30_000) {
        self.socketPath = socketPath
        self.timeoutMilliseconds = timeoutMilliseconds
    }

    /// Calls `method` (fully qualified, `org.afm.Admin.GetStatus`) and returns the reply's parameters.
    public func call(_ method: String, _ parameters: JSONObject = [:]) async throws(AdminClientError) -> JSONValue {
        let path = socketPath
        let timeout = timeoutMilliseconds
        return try await onDedicatedThread("afm-admin-call") { () throws(AdminClientError) -> JSONValue in
            let connection = try AdminConnection(path: path)
            defer { connection.close() }
            return try connection.call(method, parameters, timeoutMilliseconds: timeout)
        }
    }

    /// Calls `method` with `more: true` and streams every reply's parameters until the last one (included).
    ///
    /// The stream throws ``AdminClientError``. Cancelling the consuming task closes the connection.
    public func callWithMore(_ method: String, _ parameters: JSONObject = [:]) -> AsyncThrowingStream<JSONValue, any Error> {
        let path = socketPath
        return AsyncThrowingStream { continuation in
            let connection: AdminConnection
            do {
                connection = try AdminConnection(path: path)
                try connection.send(method: method, parameters: parameters, more: true)
            } catch {
                continuation.finish(throwing: error)
                return
            }
            continuation.onTermination = { [interrupter = connection.interrupter] _ in interrupter() }
            let handle = ConnectionHandle(connection)
            do {
                let thread = try IOThread.spawn(name: "afm-admin-more") {
                    handle.pump(method: method, into: continuation)
                }
                thread.detach()
            } catch {
                continuation.finish(throwing: AdminClientError.protocolError("cannot start a thread: \(error)"))
            }
        }
    }
}

/// Moves a connection to the one thread that reads it, while other threads may only interrupt it.
// Safety: created on the calling thread and then used only by `pump`, on exactly one other thread; other
// threads interrupt the connection through its `interrupter`, never through this object.
private final class ConnectionHandle: @unchecked Sendable {
    private let connection: AdminConnection

    init(_ connection: AdminConnection) { self.connection = connection }

    func pump(method: String, into continuation: AsyncThrowingStream<JSONValue, any Error>.Continuation) {
        defer { connection.close() }
        while true {
            do {
                let reply = try connection.receive(timeoutMilliseconds: nil, method: method)
                continuation.yield(reply.parameters)
                if !reply.continues { return continuation.finish() }
            } catch {
                return continuation.finish(throwing: error)
            }
        }
    }
}
