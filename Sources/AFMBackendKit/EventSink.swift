// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The host's event sink for one generation, with typed helpers that build an `afm_event` and call `emit`.
///
/// Safety: `@unchecked Sendable` because it holds the host's raw `ctx` pointer. The header makes `emit` callable
/// from any backend thread (`[any-thread]`) as long as calls for one generation never overlap; a sink belongs to
/// exactly one generation, and `emit(_:)` serializes its calls with a lock, so a backend that emits from two
/// threads at once (a bug) gets its events delivered one after the other instead of a trap inside the host.
public final class EventSink: @unchecked Sendable {
    /// Token counts for `USAGE`; -1 means unknown.
    public struct Usage: Sendable, Hashable {
        public var inputTokens: Int64
        public var outputTokens: Int64
        public var reasoningTokens: Int64
        public var cachedTokens: Int64

        public init(inputTokens: Int64, outputTokens: Int64, reasoningTokens: Int64, cachedTokens: Int64) {
            self.inputTokens = inputTokens
            self.outputTokens = outputTokens
            self.reasoningTokens = reasoningTokens
            self.cachedTokens = cachedTokens
        }

        public static let unknown = Usage(inputTokens: -1, outputTokens: -1, reasoningTokens: -1, cachedTokens: -1)
    }

    private let context: UnsafeMutableRawPointer?
    private let emitFunction: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<afm_event>?) -> Int32
    /// The thread inside `emit` (its `pthread_self()`, never 0 on glibc), 0 when none: it catches a concurrent
    /// `emit`, and `cancel` records whether the host called it from inside `emit`, which the ABI forbids (a backend
    /// that holds a lock across `emit` would deadlock).
    private let emittingThread = Atomic<UInt>(0)
    /// Held across the host's `emit`: calls for this generation never overlap, whichever threads make them.
    private let serial = Mutex<Void>(())

    /// The smallest sink the backend can use: struct_size, reserved0, ctx and emit.
    private static let minimumSize = MemoryLayout<afm_event_sink>.size

    /// Copies the host's sink, or returns nil when it is NULL, too small or has no `emit`.
    public init?(_ sink: UnsafePointer<afm_event_sink>?) {
        guard let sink, Int(sink.pointee.struct_size) >= Self.minimumSize, let emit = sink.pointee.emit else {
            return nil
        }
        context = sink.pointee.ctx
        emitFunction = emit
    }

    /// Sends one event.
    ///
    /// - Parameters:
    ///   - type: An `AFM_EVENT_*` value.
    ///   - index: The tool-call index, else 0.
    ///   - code: `AFM_FINISH_*` for DONE, `AFM_ERR_*` for ERROR (one outside 1-13 crosses as `AFM_ERR_INTERNAL`),
    ///     else 0.
    ///   - text: The event's text (its UTF-8 bytes cross the boundary).
    ///   - name: The function name for TOOL_CALL_BEGIN.
    ///   - usage: Token counts (USAGE); other events carry "unknown".
    /// - Returns: true to continue, false when the host asked to stop (client gone or request cancelled).
    ///
    /// Calls from several threads wait for each other (the ABI serializes them). A call from inside this sink's
    /// own `emit` on the same thread (the host calling back into the backend, which the ABI forbids) cannot wait for
    /// itself: that event is dropped and the call returns false.
    @discardableResult
    public func emit(
        _ type: afm_event_type, index: Int32 = 0, code: Int32 = 0, text: String = "", name: String = "",
        usage: Usage = .unknown
    ) -> Bool {
        let thread = UInt(pthread_self())
        guard emittingThread.load(ordering: .acquiring) != thread else { return false }
        return serial.withLock { _ in
            emittingThread.store(thread, ordering: .releasing)
            defer { emittingThread.store(0, ordering: .releasing) }
            return deliver(type, index: index, code: code, text: text, name: name, usage: usage)
        }
    }

    /// Builds the event and calls the host's `emit` (the caller holds `serial`).
    private func deliver(
        _ type: afm_event_type, index: Int32, code: Int32, text: String, name: String, usage: Usage
    ) -> Bool {
        let code = type == AFM_EVENT_ERROR && !(AFM_ERR_INVALID_REQUEST...AFM_ERR_INTERNAL).contains(code) ? AFM_ERR_INTERNAL : code
        var text = text
        var name = name
        let status = text.withUTF8 { textBytes in
            name.withUTF8 { nameBytes in
                var event = afm_event()
                event.struct_size = UInt32(MemoryLayout<afm_event>.size)
                event.type = type
                event.index = index
                event.code = code
                event.text = Self.span(textBytes)
                event.name = Self.span(nameBytes)
                event.input_tokens = usage.inputTokens
                event.output_tokens = usage.outputTokens
                event.reasoning_tokens = usage.reasoningTokens
                event.cached_tokens = usage.cachedTokens
                return withUnsafePointer(to: &event) { emitFunction(context, $0) }
            }
        }
        return status == 0
    }

    /// Whether the calling thread is inside this sink's `emit` (the host re-entered the backend from its sink).
    public var isEmittingOnCallingThread: Bool { emittingThread.load(ordering: .acquiring) == UInt(pthread_self()) }

    /// A borrowed `afm_str` over `bytes` (NULL data for an empty span, as the header allows).
    private static func span(_ bytes: UnsafeBufferPointer<UInt8>) -> afm_str {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return afm_str(data: nil, size: 0) }
        return afm_str(data: UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self), size: UInt64(bytes.count))
    }
}
