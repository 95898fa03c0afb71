// SPDX-License-Identifier: Apache-2.0

/// Why the parser rejected a request: the status to answer with and the error-envelope code and message.
struct HTTPParseError: Error, Equatable, Sendable {
    var status: Int
    var code: String
    var message: String

    static func badRequest(_ message: String) -> HTTPParseError {
        HTTPParseError(status: 400, code: "invalid_request", message: message)
    }

    static let headersTooLarge = HTTPParseError(
        status: 431, code: "headers_too_large", message: "The request line and headers exceed the size limit.")
    static let tooManyHeaderFields = HTTPParseError(
        status: 431, code: "headers_too_large", message: "The request has too many header fields.")
    static let bodyTooLarge = HTTPParseError(
        status: 413, code: "request_too_large", message: "The request body exceeds the size limit.")
    static func notImplemented(_ message: String) -> HTTPParseError {
        HTTPParseError(status: 501, code: "not_implemented", message: message)
    }
    static let versionNotSupported = HTTPParseError(
        status: 505, code: "http_version_not_supported", message: "Only HTTP/1.0 and HTTP/1.1 are supported.")
    static let expectationFailed = HTTPParseError(
        status: 417, code: "expectation_failed", message: "Only the 100-continue expectation is supported.")
}
