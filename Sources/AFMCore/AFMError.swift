// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// An error that reaches a client: a stable code, a human message, and optionally the request field at fault.
///
/// Every 4xx/5xx the gateway sends is built from one of these, so the OpenAI envelope
/// `{"error":{"message","type","param","code"}}` is produced in exactly one place.
public struct AFMError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stable code; decides the HTTP status and the error type.
    public var code: AFMErrorCode
    /// The code string clients see in `error.code`. Usually `code.rawValue`; a few OpenAI-compatible codes
    /// are more specific (for example `previous_response_not_found` is an `invalid_request`).
    public var publicCode: String
    /// A message for humans. Never contains internal details such as file paths of the daemon or stack traces.
    public var message: String
    /// The request field at fault, as a dotted/indexed path (`input[2].content[0].image_url`), if any.
    public var param: String?
    /// Seconds after which a retry may succeed (sent as `Retry-After`).
    public var retryAfterSeconds: Int?
    /// A status other than the code's own, for the few OpenAI-compatible cases that need one (404 for an
    /// unknown model).
    public var httpStatusOverride: Int?

    public init(
        _ code: AFMErrorCode,
        _ message: String,
        param: String? = nil,
        publicCode: String? = nil,
        retryAfterSeconds: Int? = nil,
        httpStatus: Int? = nil
    ) {
        self.httpStatusOverride = httpStatus
        self.code = code
        self.publicCode = publicCode ?? code.rawValue
        self.message = message
        self.param = param
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// The HTTP status for this error.
    public var httpStatus: Int { httpStatusOverride ?? code.httpStatus }

    public var description: String {
        param.map { "\(publicCode): \(message) (param: \($0))" } ?? "\(publicCode): \(message)"
    }

    /// The OpenAI error envelope: `{"error":{"message":…,"type":…,"param":…,"code":…}}`.
    public var envelope: JSONValue {
        ["error": errorObject]
    }

    /// The inner error object, also used in `response.failed` and the `error` SSE event.
    public var errorObject: JSONValue {
        [
            "message": .string(message),
            "type": .string(code.openAIType),
            "param": param.map(JSONValue.string) ?? .null,
            "code": .string(publicCode),
        ]
    }
}
