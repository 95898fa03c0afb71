// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Dispatch
import Synchronization

/// The event sink of one generation the checker starts: it records every event the backend emits, with what the
/// ABI says about it (struct size, spans, UTF-8, the terminal rule, serialized calls), and never blocks.
///
/// Like the host, `emit` returns 1 once the generation was cancelled. Recorders are never freed (the sink must
/// stay valid as long as a backend may still call it, and a broken backend may call it at any time).
///
/// Safety: `@unchecked Sendable` because it holds the C sink's pointer, written once in `init` before the recorder
/// is shared and only read afterwards (by the backend, from any thread); all other state is behind a Mutex or atomic.
final class GenerationRecorder: @unchecked Sendable {
    /// One event as the backend sent it.
    struct Event: Sendable {
        var type: Int32
        var code: Int32
        var text: [UInt8]
        var name: [UInt8]
        /// Seconds since the recorder was made.
        var at: Double
        var isTerminal: Bool { type == AFM_EVENT_DONE || type == AFM_EVENT_ERROR }
    }

    private struct State {
        var events: [Event] = []
        /// Events that arrived after the first terminal one.
        var afterTerminal = 0
        var terminals = 0
        var cancelled = false
        /// ABI violations seen in single events (a short struct_size, a NULL span with a size, a NULL event).
        var malformed: [String] = []
        /// When the first terminal event arrived.
        var terminalAt: ContinuousClock.Instant?
    }

    let requestID: UInt64
    private let state = Mutex(State())
    private let inEmit = Atomic<Bool>(false)
    private let overlappingEmits = Atomic<Int>(0)
    private let firstTerminal = DispatchSemaphore(value: 0)
    private let started = ContinuousClock.now
    /// The C sink handed to `generate` (allocated once, never freed, like the recorder).
    let sink: UnsafeMutablePointer<afm_event_sink>

    private static let keepAlive = Mutex<[GenerationRecorder]>([])

    init(requestID: UInt64) {
        self.requestID = requestID
        sink = .allocate(capacity: 1)
        sink.initialize(
            to: afm_event_sink(
                struct_size: UInt32(MemoryLayout<afm_event_sink>.size), reserved0: 0, ctx: nil, emit: Self.emit))
        sink.pointee.ctx = Unmanaged.passUnretained(self).toOpaque()
        Self.keepAlive.withLock { $0.append(self) }
    }

    private static let emit: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<afm_event>?) -> Int32 = {
        context, event in
        guard let context else { return 1 }
        return Unmanaged<GenerationRecorder>.fromOpaque(context).takeUnretainedValue().receive(event)
    }

    private func receive(_ pointer: UnsafePointer<afm_event>?) -> Int32 {
        if inEmit.exchange(true, ordering: .acquiringAndReleasing) { overlappingEmits.add(1, ordering: .relaxed) }
        defer { inEmit.store(false, ordering: .releasing) }
        let at = (ContinuousClock.now - started).seconds
        guard let pointer else {
            state.withLock { $0.malformed.append("emit with a NULL event") }
            return 1
        }
        let event = pointer.pointee
        var problems: [String] = []
        if Int(event.struct_size) < Int(AFM_EVENT_SIZE_1_0) {
            problems.append("event struct_size \(event.struct_size) < \(AFM_EVENT_SIZE_1_0)")
        }
        let text = Self.bytes(event.text, field: "text", &problems)
        let name = Self.bytes(event.name, field: "name", &problems)
        let recorded = Event(type: event.type, code: event.code, text: text, name: name, at: at)
        let (cancelled, isFirstTerminal) = state.withLock { state in
            state.malformed += problems
            if state.terminals > 0 { state.afterTerminal += 1 }
            state.events.append(recorded)
            var first = false
            if recorded.isTerminal {
                state.terminals += 1
                first = state.terminals == 1
                if first { state.terminalAt = .now }
            }
            return (state.cancelled, first)
        }
        if isFirstTerminal { firstTerminal.signal() }
        return cancelled ? 1 : 0
    }

    /// The bytes of a span, or [] with a problem noted for a span that has a size but no data.
    private static func bytes(_ span: afm_str, field: String, _ problems: inout [String]) -> [UInt8] {
        guard span.size > 0 else { return [] }
        guard let data = span.data else {
            problems.append("\(field) has size \(span.size) but NULL data")
            return []
        }
        guard span.size <= 64 << 20 else {
            problems.append("\(field) has an implausible size \(span.size)")
            return []
        }
        return Array(UnsafeRawBufferPointer(start: data, count: Int(span.size)))
    }

    /// Marks the generation cancelled: from now on `emit` returns 1 (as the host's does).
    func markCancelled() { state.withLock { $0.cancelled = true } }

    /// Waits for the first terminal event.
    ///
    /// - Returns: false when none arrived within `seconds`.
    func waitForTerminal(seconds: Double) -> Bool {
        if terminals > 0 { return true }
        guard firstTerminal.wait(timeout: .now() + .milliseconds(Int(seconds * 1000))) == .success else { return false }
        firstTerminal.signal()  // later waiters see it too
        return true
    }

    var events: [Event] { state.withLock { $0.events } }
    var terminals: Int { state.withLock { $0.terminals } }
    var eventsAfterTerminal: Int { state.withLock { $0.afterTerminal } }
    var malformed: [String] { state.withLock { $0.malformed } }
    /// How many `emit` calls overlapped another one of this generation (the ABI serializes them).
    var overlapping: Int { overlappingEmits.load(ordering: .relaxed) }
    var terminal: Event? { events.first(where: \.isTerminal) }
    /// When the first terminal event arrived, or nil before.
    var terminalAt: ContinuousClock.Instant? { state.withLock { $0.terminalAt } }
    /// The ABI's order rules for one generation (exactly one terminal event, nothing after it, serialized emits,
    /// well-formed events): the first one broken, or nil.
    var orderViolation: String? {
        if terminals != 1 { return "generation \(requestID) sent \(terminals) terminal events" }
        if eventsAfterTerminal > 0 { return "generation \(requestID) sent \(eventsAfterTerminal) event(s) after its terminal" }
        if overlapping > 0 { return "generation \(requestID) had overlapping emit calls" }
        return malformed.first.map { "generation \(requestID): \($0)" }
    }
    /// The concatenated TEXT_DELTA bytes.
    var text: [UInt8] { events.filter { $0.type == AFM_EVENT_TEXT_DELTA }.flatMap(\.text) }
}

extension Duration {
    /// The duration in seconds.
    var seconds: Double {
        let (whole, fraction) = components
        return Double(whole) + Double(fraction) / 1e18
    }
}
