// SPDX-License-Identifier: Apache-2.0
import AFMCore
import CAFMBackendABI
import Foundation
import Synchronization

/// Routes C `emit` calls to their `GenerationStream`, and owns the C sink structs.
///
/// The sink's `ctx` is the stream's process-unique id, not a pointer to it: a backend that keeps emitting after
/// its terminal event (a contract violation the host must survive) then reaches an id that is no longer in the
/// table, and its events are dropped instead of touching freed memory. For the same reason sink structs are
/// recycled only after a quarantine period instead of being freed.
final class GenerationTable: Sendable {
    static let shared = GenerationTable()

    private let streams = Mutex<[UInt64: GenerationStream]>([:])
    private let nextID = Atomic<UInt64>(1)
    private let sinks = SinkPool()

    /// A process-unique generation id.
    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    func register(_ stream: GenerationStream) {
        streams.withLock { $0[stream.id] = stream }
    }

    func remove(_ id: UInt64) {
        _ = streams.withLock { $0.removeValue(forKey: id) }
    }

    func lookup(_ id: UInt64) -> GenerationStream? {
        streams.withLock { $0[id] }
    }

    var activeCount: Int { streams.withLock { $0.count } }

    func lookupAll() -> [GenerationStream] {
        streams.withLock { Array($0.values) }
    }

    /// A sink whose `ctx` carries `id`. Give it back with `recycle` after the terminal event.
    func makeSink(for id: UInt64) -> SinkPool.Sink { sinks.take(id: id) }

    func recycle(_ sink: SinkPool.Sink) { sinks.give(sink) }
}

/// The C `emit` of every sink: copies the event and hands it to its stream.
let emitTrampoline: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<afm_event>?) -> Int32 = { context, event in
    let id = UInt64(UInt(bitPattern: context))
    guard let stream = GenerationTable.shared.lookup(id) else { return 1 }
    guard let event else {
        return stream.receive(.failed(.internal, message: "the backend emitted a NULL event"))
    }
    return stream.receive(BackendEvent(copying: event))
}

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
        func count(_ value: Int64) -> Int? { value >= 0 ? Int(value) : nil }
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
