// SPDX-License-Identifier: Apache-2.0
import AFMCore
import CAFMBackendABI

extension BackendEvent {
    /// The largest text a single event may carry; larger is a backend bug, reported as an error.
    static let maximumEventBytes = 16 * 1024 * 1024

    /// Copies a C event, validating what can be validated without trusting the backend.
    init(copying pointer: UnsafePointer<afm_event>) {
        let raw = pointer.pointee
        guard raw.struct_size >= AFM_EVENT_SIZE_1_0 else {
            self = .failed(.internal, message: "the backend emitted a malformed event (struct_size \(raw.struct_size) < \(AFM_EVENT_SIZE_1_0))")
            return
        }
        guard raw.text.size <= UInt64(Self.maximumEventBytes), raw.name.size <= 64 * 1024,
            raw.text.data != nil || raw.text.size == 0, raw.name.data != nil || raw.name.size == 0
        else {
            self = .failed(.internal, message: "the backend emitted an event with an invalid string span")
            return
        }
        // A backend's counts are untrusted: capped (BackendUsage.count(abiValue:)).
        func count(_ value: Int64) -> Int? { BackendUsage.count(abiValue: value) }
        let index = Int(max(0, raw.index))
        switch raw.type {
        case AFM_EVENT_TEXT_DELTA:
            self = .textDelta(raw.text.string())
        case AFM_EVENT_TOOL_CALL_BEGIN:
            self = .toolCallBegin(index: index, name: raw.name.string(), callID: raw.text.string())
        case AFM_EVENT_TOOL_CALL_ARGUMENTS:
            self = .toolCallArguments(index: index, delta: raw.text.string())
        case AFM_EVENT_TOOL_CALL_END:
            self = .toolCallEnd(index: index)
        case AFM_EVENT_REASONING_TEXT:
            self = .reasoningText(raw.text.string())
        case AFM_EVENT_REASONING_STATE:
            self = .reasoningState(raw.text.bytes())
        case AFM_EVENT_USAGE:
            self = .usage(
                BackendUsage(
                    inputTokens: count(raw.input_tokens), outputTokens: count(raw.output_tokens),
                    reasoningTokens: count(raw.reasoning_tokens), cachedTokens: count(raw.cached_tokens)))
        case AFM_EVENT_DONE:
            self = .done(FinishReason(abiValue: raw.code))
        case AFM_EVENT_ERROR:
            let code = AFMErrorCode(abiValue: raw.code)
            let message = raw.text.string(limit: 4096)
            self = .failed(code, message: message.isEmpty ? "the backend failed (\(code.rawValue))" : message)
        default:
            // Unknown event types come from a newer minor; they are skipped, not fatal.
            self = .usage(BackendUsage())
        }
    }
}
