// SPDX-License-Identifier: Apache-2.0
import AFMCore

/// Token counts a backend reported. `nil` means the backend did not say.
public struct BackendUsage: Sendable, Hashable {
    public var inputTokens: Int?
    public var outputTokens: Int?
    public var reasoningTokens: Int?
    public var cachedTokens: Int?

    public init(inputTokens: Int? = nil, outputTokens: Int? = nil, reasoningTokens: Int? = nil, cachedTokens: Int? = nil) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.reasoningTokens = reasoningTokens
        self.cachedTokens = cachedTokens
    }

    /// The largest count the host believes (2^32 - 1): no generation comes near it, and sums of such counts
    /// (`total_tokens`, the token monitor's totals) cannot overflow and trap.
    static let maximumCount = Int64(UInt32.max)

    /// A count as an `afm_event`, a runner's event frame or a tokenizer's answer carries it: negative means "not
    /// said"; larger than ``maximumCount`` is capped. Backends and runner processes are untrusted: every reader of
    /// their token counts goes through here.
    static func count(abiValue value: Int64) -> Int? { value >= 0 ? Int(min(value, maximumCount)) : nil }
}

/// Why a generation ended normally.
public enum FinishReason: String, Sendable, Hashable {
    case stop
    case length
    case toolCalls = "tool_calls"
    case cancelled

    init(abiValue: Int32) {
        switch abiValue {
        case 1: self = .length
        case 2: self = .toolCalls
        case 3: self = .cancelled
        default: self = .stop
        }
    }
}

/// One event of a generation, copied out of the C event during `emit`.
public enum BackendEvent: Sendable, Hashable {
    case textDelta(String)
    case toolCallBegin(index: Int, name: String, callID: String)
    case toolCallArguments(index: Int, delta: String)
    case toolCallEnd(index: Int)
    case reasoningText(String)
    case reasoningState([UInt8])
    case usage(BackendUsage)
    /// Terminal: the generation finished.
    case done(FinishReason)
    /// Terminal: the generation failed.
    case failed(AFMErrorCode, message: String)

    /// Whether this event ends the generation.
    public var isTerminal: Bool {
        switch self {
        case .done, .failed: true
        default: false
        }
    }

    /// Whether this event ends a cancelled generation (the backend's `done(cancelled)`, or a `cancelled` failure).
    public var isCancellation: Bool {
        switch self {
        case .done(.cancelled), .failed(.cancelled, _): true
        default: false
        }
    }
}
