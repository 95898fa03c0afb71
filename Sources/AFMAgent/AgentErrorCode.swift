// SPDX-License-Identifier: Apache-2.0
import AFMCore

/// The stable codes of ``AgentError``, the same on every surface: the CLI's exit status, the bridge's JSON-RPC
/// error, an HTTP status where an agent answers over HTTP.
///
/// Each code maps to the gateway's error table (``AFMErrorCode``) for its HTTP status and exit status, so
/// `afm agent` exits like `afm respond` for the same failure.
public enum AgentErrorCode: String, Sendable, Hashable, CaseIterable {
    /// No gateway, no such model, or the model cannot answer now.
    case modelUnavailable = "model_unavailable"
    /// The model's or the gateway's guardrail refused the content.
    case guardrailViolation = "guardrail_violation"
    /// The model refused to answer.
    case refusal
    /// The prompt alone does not fit the model's input budget (older turns were already trimmed).
    case contextSizeExceeded = "context_size_exceeded"
    /// Too many requests, or a quota is spent; retry later.
    case rateLimited = "rate_limited"
    /// The model does not support the prompt's language.
    case unsupportedLanguage = "unsupported_language"
    /// A tool's parameters or a schema turn's schema is outside the supported subset, or the structured answer
    /// does not parse.
    case invalidSchema = "invalid_schema"
    /// A tool provider (an MCP server) failed in a way the model cannot recover from.
    case toolFailed = "tool_failed"
    /// The host cancelled the turn.
    case cancelled
    /// The gateway or model is busy; retry later.
    case busy
    /// The request was malformed (a bad option, an unknown tool name in the policy, a 400 from the gateway).
    case invalidRequest = "invalid_request"
    /// Generation failed: a gateway error, a lost connection mid-answer, or the turn ran out of model steps.
    case generationFailed = "generation_failed"

    /// The gateway table's code with the same meaning (for HTTP status and exit status).
    public var gatewayCode: AFMErrorCode {
        switch self {
        case .modelUnavailable: .modelUnavailable
        case .guardrailViolation: .guardrailViolation
        case .refusal: .refusal
        case .contextSizeExceeded: .contextLengthExceeded
        case .rateLimited: .rateLimited
        case .unsupportedLanguage: .unsupportedCapability
        case .invalidSchema, .invalidRequest: .invalidRequest
        case .toolFailed: .toolFailed
        case .cancelled: .cancelled
        case .busy: .busy
        case .generationFailed: .internal
        }
    }

    /// The HTTP status an agent surface answers with (the gateway's table).
    public var httpStatus: Int { gatewayCode.httpStatus }

    /// The process exit status of `afm agent` (sysexits-style, as `afm respond`): 65 bad input, 69 unavailable,
    /// 70 failure, 130 cancelled.
    public var exitStatus: Int32 { gatewayCode.exitStatus }

    /// The JSON-RPC error number of the bridge: one per code in the implementation range −32000…−32099 (the
    /// string code travels in `error.data.code`).
    public var jsonRPCCode: Int {
        -32001 - (Self.allCases.firstIndex(of: self) ?? 0)
    }

    /// The agent code for an error code the gateway sent (`error.code` of a response or an `error` event).
    ///
    /// The gateway's 400-family codes (`invalid_value`, `unknown_parameter`, …) are `invalid_request`; a
    /// connection that could not be made is `model_unavailable`; anything unknown is `generation_failed`.
    public init(gatewayCode code: String) {
        switch code {
        case "model_unavailable", "model_not_found", "backend_crashed", "incompatible", "connection", "http_404",
            "http_502", "http_503":
            self = .modelUnavailable
        case "guardrail_violation": self = .guardrailViolation
        case "refusal": self = .refusal
        case "context_length_exceeded", "context_size_exceeded": self = .contextSizeExceeded
        case "rate_limited", "quota_exceeded", "http_429": self = .rateLimited
        case "unsupported_language": self = .unsupportedLanguage
        case "invalid_tool_schema", "invalid_schema", "invalid_json_schema", "invalid_structured_output":
            self = .invalidSchema
        case "tool_failed": self = .toolFailed
        case "cancelled": self = .cancelled
        case "busy": self = .busy
        case "invalid_request", "invalid_value", "invalid_type", "invalid_json", "missing_required_parameter",
            "unknown_parameter", "unsupported_parameter", "unsupported_capability", "unsupported_tool", "empty_array",
            "integer_below_min_value", "invalid_encrypted_content", "invalid_image_url", "too_many_images",
            "invalid_base64", "image_too_large", "unsupported_image_format", "invalid_image", "invalid_image_dimensions",
            "previous_response_not_found", "duplicate_header", "unsupported_media_type", "forbidden_host",
            "forbidden_origin", "request_too_large", "headers_too_large", "http_400", "http_403", "http_413", "http_415",
            "http_431":
            self = .invalidRequest
        default: self = .generationFailed
        }
    }
}
