// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI

/// The lower-snake-case names of the `AFM_ERR_*` codes and `AFM_FINISH_*` reasons, as scripts, records, logs and the
/// admin socket spell them (docs/backend-abi.md §6).
public enum ErrorCodeName {
    /// `invalid_request` … `internal`: the codes a script may use in an `error` step, in ABI order.
    public static let errorCodes: [(name: String, code: afm_status)] = [
        ("invalid_request", AFM_ERR_INVALID_REQUEST),
        ("model_unavailable", AFM_ERR_MODEL_UNAVAILABLE),
        ("context_length_exceeded", AFM_ERR_CONTEXT_LENGTH_EXCEEDED),
        ("rate_limited", AFM_ERR_RATE_LIMITED),
        ("quota_exceeded", AFM_ERR_QUOTA_EXCEEDED),
        ("guardrail_violation", AFM_ERR_GUARDRAIL_VIOLATION),
        ("refusal", AFM_ERR_REFUSAL),
        ("unsupported_capability", AFM_ERR_UNSUPPORTED_CAPABILITY),
        ("tool_failed", AFM_ERR_TOOL_FAILED),
        ("cancelled", AFM_ERR_CANCELLED),
        ("busy", AFM_ERR_BUSY),
        ("timeout", AFM_ERR_TIMEOUT),
        ("internal", AFM_ERR_INTERNAL),
    ]

    /// The finish reasons a script may name in a `finish` step.
    public static let finishReasons: [(name: String, reason: afm_finish_reason)] = [
        ("stop", AFM_FINISH_STOP),
        ("length", AFM_FINISH_LENGTH),
        ("tool_calls", AFM_FINISH_TOOL_CALLS),
    ]

    /// The `AFM_ERR_*` value for a name, or nil.
    public static func errorCode(named name: String) -> afm_status? {
        errorCodes.first(where: { $0.name == name })?.code
    }

    /// The name of an `AFM_ERR_*` value (`incompatible` included); unknown values read `error_<n>`.
    public static func name(ofError code: afm_status) -> String {
        if code == AFM_ERR_INCOMPATIBLE { return "incompatible" }
        return errorCodes.first(where: { $0.code == code })?.name ?? "error_\(code)"
    }

    /// The `AFM_FINISH_*` value for a script name, or nil.
    public static func finishReason(named name: String) -> afm_finish_reason? {
        finishReasons.first(where: { $0.name == name })?.reason
    }

    /// The name of an `AFM_FINISH_*` value (`cancelled` included).
    public static func name(ofFinish reason: afm_finish_reason) -> String {
        if reason == AFM_FINISH_CANCELLED { return "cancelled" }
        return finishReasons.first(where: { $0.reason == reason })?.name ?? "finish_\(reason)"
    }
}
