// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import AFMSSE

/// What a protocol translator makes of the upstream's stream: ABI events, plus the facts the generation logs.
enum StreamOutput: Sendable, Equatable {
    case text(String)
    case toolBegin(index: Int32, name: String, callID: String)
    case toolArguments(index: Int32, delta: String)
    case toolEnd(index: Int32)
    case reasoningText(String)
    /// The `ReasoningState` envelope's bytes.
    case reasoningState(String)
    case usage(EventSink.Usage)
    /// The model the upstream says it ran (logged, never sent to the host).
    case upstreamModel(String)
    /// The upstream finished: an `AFM_FINISH_*` reason.
    case done(afm_finish_reason)
    /// The upstream reported a failure inside the stream.
    case failed(code: afm_status, message: String)
}

/// A translator from one protocol's SSE events to `StreamOutput`.
protocol StreamTranslator {
    /// Translates one SSE event.
    mutating func translate(_ event: SSEParser.Event) -> [StreamOutput]
    /// True once the upstream's terminal event (`response.completed`, `[DONE]`, …) was translated.
    var finished: Bool { get }
}

extension EventSink.Usage {
    /// Usage from an upstream's object, reading the named fields (missing ones are -1).
    static func from(
        _ object: [String: Any]?, input: String, output: String, details: (input: String, output: String)
    ) -> EventSink.Usage? {
        guard let object else { return nil }
        func count(_ value: Any?) -> Int64 { JSON.int(value).map(Int64.init) ?? -1 }
        return EventSink.Usage(
            inputTokens: count(object[input]), outputTokens: count(object[output]),
            reasoningTokens: count(JSON.object(object[details.output])?["reasoning_tokens"]),
            cachedTokens: count(JSON.object(object[details.input])?["cached_tokens"]))
    }
}
