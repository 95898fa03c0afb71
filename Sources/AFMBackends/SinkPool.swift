// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Synchronization

/// Recycles `afm_event_sink` structs after a quarantine, so a late `emit` through a stale sink pointer
/// never touches freed memory (it reaches an id that is gone and is dropped).
final class SinkPool: Sendable {
    /// Safety: the pointee is written only while the sink is owned by exactly one generation (between `take`
    /// and `give`), and read by that generation's backend; the pool only stores the address.
    struct Sink: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<afm_event_sink>
    }

    private static let quarantine: Duration = .seconds(30)
    private let free = Mutex<[(sink: Sink, releasedAt: ContinuousClock.Instant)]>([])

    /// The C signature of `afm_event_sink.emit`.
    typealias Emit = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<afm_event>?) -> Int32

    /// A sink whose `ctx` carries `id` and whose `emit` is `emit` (the host's trampoline, or the runner's relay).
    func take(id: UInt64, emit: Emit = emitTrampoline) -> Sink {
        let now = ContinuousClock.now
        let reused = free.withLock { list -> Sink? in
            guard let first = list.first, now - first.releasedAt > Self.quarantine else { return nil }
            return list.removeFirst().sink
        }
        let sink = reused ?? Sink(pointer: .allocate(capacity: 1))
        sink.pointer.initialize(
            to: afm_event_sink(
                struct_size: UInt32(MemoryLayout<afm_event_sink>.size),
                reserved0: 0,
                ctx: UnsafeMutableRawPointer(bitPattern: UInt(id)),
                emit: emit))
        return sink
    }

    func give(_ sink: Sink) {
        free.withLock { $0.append((sink, .now)) }
    }
}
