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
    /// Released sinks, oldest first: a FIFO kept as an array with a head index, so taking one is O(1) (the
    /// consumed prefix is dropped in bulk now and then, not element by element).
    private struct FreeList {
        var entries: [(sink: Sink, releasedAt: ContinuousClock.Instant)] = []
        var head = 0
    }

    private let free = Mutex(FreeList())
    /// Sinks retired for good: a backend may still call them at any time, so they are never reused or freed. Kept
    /// here rather than dropped so that they stay reachable (what LeakSanitizer checks) and countable; a sink that a
    /// host forgets to recycle or retire is still reported as a leak under ASan.
    private let retired = Mutex<[Sink]>([])

    /// The C signature of `afm_event_sink.emit`.
    typealias Emit = @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<afm_event>?) -> Int32

    /// A sink whose `ctx` carries `id` and whose `emit` is `emit` (the host's trampoline, or the runner's relay).
    func take(id: UInt64, emit: Emit = emitTrampoline) -> Sink {
        let now = ContinuousClock.now
        let reused = free.withLock { list -> Sink? in
            guard list.head < list.entries.count, now - list.entries[list.head].releasedAt > Self.quarantine else { return nil }
            let sink = list.entries[list.head].sink
            list.head += 1
            if list.head >= 1024 && list.head * 2 >= list.entries.count {
                list.entries.removeFirst(list.head)
                list.head = 0
            }
            return sink
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
        free.withLock { $0.entries.append((sink, .now)) }
    }

    /// Keeps `sink` out of the pool for the rest of the process: its generation's stream expired, and the backend
    /// may still call it (an `emit` then reaches an id that is gone and is dropped).
    func retire(_ sink: Sink) {
        retired.withLock { $0.append(sink) }
    }

    /// How many sinks were retired for good (tests).
    var retiredCount: Int { retired.withLock { $0.count } }

    /// Whether a sink is in the free list twice (it would later be handed to two generations at once). Tests.
    var hasDuplicateFreeEntries: Bool {
        free.withLock { list in
            let waiting = list.entries[list.head...].map { UInt(bitPattern: $0.sink.pointer) }
            return Set(waiting).count != waiting.count
        }
    }
}
