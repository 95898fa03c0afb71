// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem

/// One blocking client connection to an admin socket: for command-line tools, and for ``AdminClient`` (which
/// runs it on a dedicated thread).
///
/// Not thread-safe: one caller at a time. Closed by ``close()`` or when released.
public final class AdminConnection {
    /// One reply.
    public struct Reply: Sendable, Hashable {
        /// The reply's `parameters` object.
        public var parameters: JSONValue
        /// Whether more replies to the same call follow.
        public var continues: Bool
    }

    /// The socket path.
    public let path: String
    private let guarded: GuardedDescriptor
    private var descriptor: FileDescriptor { guarded.descriptor }
    private var framer = VarlinkFramer(limit: 64 << 20)
    private var closed = false

    /// Connects to the socket at `path`.
    ///
    /// - Throws: ``AdminClientError/cannotConnect(path:reason:permissionDenied:)``.
    public init(path: String) throws(AdminClientError) {
        self.path = path
        do {
            guarded = GuardedDescriptor(try FileDescriptor.connectUnix(path: path))
        } catch {
            let denied = error.errno == .permissionDenied || error.errno == .notPermitted
            let reason: String
            switch error.errno.rawValue {
            case Errno.connectionRefused.rawValue: reason = "nobody is listening (is afmd running?)"
            case 2: reason = "no such socket (is afmd running? set --socket or AFM_ADMIN_SOCKET)"
            default: reason = error.errno.description
            }
            throw .cannotConnect(path: path, reason: reason, permissionDenied: denied)
        }
    }

    deinit { close() }

    /// Closes the connection (idempotent).
    public func close() {
        guard !closed else { return }
        closed = true
        guarded.close()
    }

    /// Interrupts a blocked ``receive(timeoutMilliseconds:method:)`` from another thread.
    public func interrupt() { guarded.interrupt() }

    /// A handle that can interrupt this connection from any thread, safely even after it was closed.
    public var interrupter: @Sendable () -> Void {
        let guarded = self.guarded
        return { guarded.interrupt() }
    }

    /// Sends a call.
    public func send(method: String, parameters: JSONObject = [:], more: Bool = false) throws(AdminClientError) {
        var call: JSONObject = ["method": .string(method)]
        if !parameters.isEmpty { call["parameters"] = .object(parameters) }
        if more { call["more"] = true }
        do {
            try descriptor.writeAll(VarlinkFramer.encode(.object(call)))
        } catch {
            throw .connectionClosed
        }
    }

    /// Waits for the next reply; error replies are thrown as ``AdminClientError/remote(_:)``.
    ///
    /// - Parameter timeoutMilliseconds: how long to wait; `nil` waits forever.
    public func receive(timeoutMilliseconds: Int?, method: String = "call") throws(AdminClientError) -> Reply {
        while true {
            switch framer.next() {
            case .message(let bytes):
                guard case .object(let message)? = try? JSONParser.parse(bytes) else {
                    throw .protocolError("the reply is not a JSON object")
                }
                let parameters = message["parameters"] ?? [:]
                if let name = message["error"]?.stringValue {
                    throw .remote(AdminError(name, parameters.objectValue ?? [:]))
                }
                return Reply(parameters: parameters, continues: message["continues"]?.boolValue ?? false)
            case .tooLarge:
                throw .protocolError("the reply is larger than 64 MiB")
            case nil:
                if let timeoutMilliseconds {
                    let ready = try? descriptor.poll(readable: true, writable: false, timeoutMilliseconds: Int32(timeoutMilliseconds))
                    guard ready?.readable == true else { throw .timedOut(method: method, milliseconds: timeoutMilliseconds) }
                }
                guard let bytes = try? descriptor.readSome(), !bytes.isEmpty else { throw .connectionClosed }
                framer.append(bytes)
            }
        }
    }

    /// Sends a call and waits for its single reply.
    public func call(_ method: String, _ parameters: JSONObject = [:], timeoutMilliseconds: Int? = 30_000)
        throws(AdminClientError) -> JSONValue
    {
        try send(method: method, parameters: parameters)
        return try receive(timeoutMilliseconds: timeoutMilliseconds, method: method).parameters
    }
}

@available(*, unavailable)
extension AdminConnection: Sendable {}
