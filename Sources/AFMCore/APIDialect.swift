// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The API dialects the gateway speaks. Each has its own error envelope; the codes, statuses and messages come
/// from the one error table (`AFMErrorCode`), so an error is the same error in every dialect.
public enum APIDialect: String, Sendable, Hashable, CaseIterable {
    /// OpenAI Responses (`/v1/responses`).
    case responses
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    case chatCompletions = "chat_completions"
    /// Anthropic Messages (`/v1/messages`, `/v1/messages/count_tokens`).
    case messages

    /// The dialect whose envelope an answer on `path` (without its query) uses: Anthropic's on `/v1/messages`
    /// and below it, OpenAI's everywhere else (Responses and Chat Completions share it).
    ///
    /// The HTTP layer uses this for errors it raises before any dialect decoded the request (authentication,
    /// admission, a wrong method), so a client always gets an envelope it can parse.
    public init(path: String) {
        if path == "/v1/messages" || path.hasPrefix("/v1/messages/") || path == "/messages" || path.hasPrefix("/messages/") {
            self = .messages
        } else if path == "/v1/chat/completions" || path == "/chat/completions" {
            self = .chatCompletions
        } else {
            self = .responses
        }
    }

    /// The error envelope of this dialect.
    ///
    /// - OpenAI (Responses, Chat Completions): `{"error":{"message","type","param","code"}}`.
    /// - Anthropic: `{"type":"error","error":{"type","message"}}`, with Anthropic's type for the status.
    public func envelope(_ error: AFMError) -> JSONValue {
        switch self {
        case .responses, .chatCompletions: error.envelope
        case .messages: error.anthropicEnvelope
        }
    }

    /// The encoded error envelope of this dialect.
    public func errorBody(_ error: AFMError) -> [UInt8] {
        envelope(error).encoded()
    }
}

extension AFMError {
    /// Anthropic's error envelope: `{"type":"error","error":{"type":…,"message":…}}`. The field at fault, which
    /// Anthropic's shape has no member for, is named in the message.
    public var anthropicEnvelope: JSONValue {
        ["type": "error", "error": anthropicErrorObject]
    }

    /// The inner object of ``anthropicEnvelope``, also the data of a stream's `error` event.
    public var anthropicErrorObject: JSONValue {
        let text = param.map { message.contains($0) ? message : "\(message) (\($0))" } ?? message
        return ["type": .string(AFMErrorCode.anthropicType(forStatus: httpStatus)), "message": .string(text)]
    }
}

extension AFMErrorCode {
    /// Anthropic's error `type` for an HTTP status (its errors page): 400 `invalid_request_error`,
    /// 401 `authentication_error`, 403 `permission_error`, 404 `not_found_error`, 413 `request_too_large`,
    /// 429 `rate_limit_error`, 503/529 `overloaded_error`, 504 `timeout_error`, other 5xx `api_error`.
    public static func anthropicType(forStatus status: Int) -> String {
        switch status {
        case 401: "authentication_error"
        case 403: "permission_error"
        case 404: "not_found_error"
        case 413: "request_too_large"
        case 429: "rate_limit_error"
        case 503, 529: "overloaded_error"
        case 504: "timeout_error"
        case 500...: "api_error"
        default: "invalid_request_error"
        }
    }
}
