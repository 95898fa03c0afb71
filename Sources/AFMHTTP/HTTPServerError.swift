// SPDX-License-Identifier: Apache-2.0

/// Why an ``HTTPServer`` could not start.
///
/// Prints as a sentence for operators, for example "cannot listen on 127.0.0.1:11535: Address already in use".
public struct HTTPServerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The kind of failure, for programmatic checks.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: Hashable, Sendable {
            case cannotListen
            case invalidAddress
            case alreadyRunning
            case startFailed
        }

        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// Binding or listening failed (port taken, permission denied, address not local).
        public static let cannotListen = Code(.cannotListen)
        /// The host is not an IPv4/IPv6 literal or `localhost`, or the port is out of range.
        public static let invalidAddress = Code(.invalidAddress)
        /// `start` was called on a running server.
        public static let alreadyRunning = Code(.alreadyRunning)
        /// An event loop could not be created (out of descriptors or threads).
        public static let startFailed = Code(.startFailed)

        /// The code's name, for example `cannotListen`.
        public var description: String {
            switch value {
            case .cannotListen: "cannotListen"
            case .invalidAddress: "invalidAddress"
            case .alreadyRunning: "alreadyRunning"
            case .startFailed: "startFailed"
            }
        }
    }

    /// The kind of failure.
    public var code: Code
    /// The operator-facing sentence.
    public var message: String

    /// The operator-facing ``message``.
    public var description: String { message }

    static func cannotListen(host: String, port: Int, reason: String) -> HTTPServerError {
        HTTPServerError(code: .cannotListen, message: "cannot listen on \(host):\(port): \(reason)")
    }

    static func invalidAddress(host: String, port: Int) -> HTTPServerError {
        HTTPServerError(
            code: .invalidAddress,
            message: "cannot listen on \(host):\(port): not an IPv4/IPv6 address or localhost, or bad port")
    }

    static func cannotListen(socket path: String, reason: String) -> HTTPServerError {
        HTTPServerError(code: .cannotListen, message: "cannot listen on unix:\(path): \(reason)")
    }

    static let alreadyRunning = HTTPServerError(code: .alreadyRunning, message: "the HTTP server is already running")

    static func startFailed(_ reason: String) -> HTTPServerError {
        HTTPServerError(code: .startFailed, message: "cannot start the HTTP server: \(reason)")
    }
}
