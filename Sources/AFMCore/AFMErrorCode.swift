// SPDX-License-Identifier: Apache-2.0

/// The stable error codes shared by the host, the backends (as `AFM_ERR_*` in `afm_backend.h`), the HTTP
/// layer, the admin socket and the command-line tools.
///
/// This is the one table from a code to everything a code means outside the process: the HTTP status, the
/// OpenAI error `type`, and the exit status of the CLIs. Never renumber a case: `abiValue` is part of the ABI.
public enum AFMErrorCode: String, Sendable, Hashable, CaseIterable {
    case invalidRequest = "invalid_request"
    case modelUnavailable = "model_unavailable"
    case contextLengthExceeded = "context_length_exceeded"
    case rateLimited = "rate_limited"
    case quotaExceeded = "quota_exceeded"
    case guardrailViolation = "guardrail_violation"
    case refusal = "refusal"
    case unsupportedCapability = "unsupported_capability"
    case toolFailed = "tool_failed"
    case cancelled = "cancelled"
    case busy = "busy"
    case timeout = "timeout"
    case `internal` = "internal"
    case incompatible = "incompatible"
    /// Host-only: the process hosting the backend (its runner) died mid-request. Never crosses the ABI.
    case backendCrashed = "backend_crashed"
    /// Host-only: a structured answer (`text.format` `json_schema` or `json_object`) that a backend said it
    /// finished is not JSON, or does not match the schema. The host checks every such answer before calling the
    /// response `completed`; this is a backend's failure, never the client's. Never crosses the ABI.
    case invalidStructuredOutput = "invalid_structured_output"

    /// The `AFM_ERR_*` value of this code in `afm_backend.h`.
    public var abiValue: Int32 {
        switch self {
        case .invalidRequest: 1
        case .modelUnavailable: 2
        case .contextLengthExceeded: 3
        case .rateLimited: 4
        case .quotaExceeded: 5
        case .guardrailViolation: 6
        case .refusal: 7
        case .unsupportedCapability: 8
        case .toolFailed: 9
        case .cancelled: 10
        case .busy: 11
        case .timeout: 12
        case .internal: 13
        case .incompatible: 14
        case .backendCrashed: 1000
        case .invalidStructuredOutput: 1001
        }
    }

    /// Whether the code exists only in the host (values from 1000): a backend cannot send it, and
    /// `init(abiValue:)` never returns it.
    public var isHostOnly: Bool { abiValue >= 1000 }

    /// The code for an `AFM_ERR_*` value; unknown values (a newer backend's codes) map to `.internal`.
    public init(abiValue: Int32) {
        self = Self.allCases.first(where: { $0.abiValue == abiValue && !$0.isHostOnly }) ?? .internal
    }

    /// The HTTP status a client sees for this code.
    ///
    /// `cancelled` is 499 (nginx's "client closed request"): it is logged, never sent, because the client is gone.
    public var httpStatus: Int {
        switch self {
        case .invalidRequest, .contextLengthExceeded, .guardrailViolation, .refusal, .unsupportedCapability: 400
        case .rateLimited, .quotaExceeded: 429
        case .modelUnavailable, .busy, .backendCrashed: 503
        case .timeout: 504
        case .cancelled: 499
        case .toolFailed, .internal, .incompatible, .invalidStructuredOutput: 500
        }
    }

    /// The OpenAI error `type` that clients switch on.
    public var openAIType: String {
        switch httpStatus {
        case 400: "invalid_request_error"
        case 429: "rate_limit_error"
        case 503: "service_unavailable_error"
        case 504: "timeout_error"
        default: "server_error"
        }
    }

    /// The exit status of `afmctl`/`afm` when a call fails with this code (sysexits.h where one fits).
    public var exitStatus: Int32 {
        switch self {
        case .invalidRequest, .contextLengthExceeded, .unsupportedCapability, .guardrailViolation, .refusal: 65  // EX_DATAERR
        case .modelUnavailable, .busy, .rateLimited, .quotaExceeded, .backendCrashed: 69  // EX_UNAVAILABLE
        case .timeout: 75  // EX_TEMPFAIL
        case .cancelled: 130
        case .toolFailed, .internal, .incompatible, .invalidStructuredOutput: 70  // EX_SOFTWARE
        }
    }
}
