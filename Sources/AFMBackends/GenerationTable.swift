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
///
/// Every `emit` looks its stream up here, from many backend threads at once, so the table is split into shards
/// by id, each with its own lock: with one lock for the whole table, `emit` calls of unrelated generations
/// queued behind each other, and on a busy machine a preempted lock holder sent every other emitter into the
/// kernel (a quarter of afmd's CPU under `scripts/bench-http`, in `futex_lock_pi`).
final class GenerationTable: Sendable {
    static let shared = GenerationTable()

    /// One lock and the streams whose id falls to it.
    private final class Shard: Sendable {
        let streams = Mutex<[UInt64: GenerationStream]>([:])
    }

    /// A power of two, so a shard is picked with a mask; ids are sequential, so shards fill evenly.
    private static let shardCount = 64
    private let shards: [Shard] = (0..<GenerationTable.shardCount).map { _ in Shard() }
    private let nextID = Atomic<UInt64>(1)
    private let sinks = SinkPool()

    /// A process-unique generation id.
    func makeID() -> UInt64 {
        nextID.wrappingAdd(1, ordering: .relaxed).oldValue
    }

    private func shard(_ id: UInt64) -> Shard {
        shards[Int(truncatingIfNeeded: id) & (Self.shardCount - 1)]
    }

    func register(_ stream: GenerationStream) {
        shard(stream.id).streams.withLock { $0[stream.id] = stream }
    }

    func remove(_ id: UInt64) {
        _ = shard(id).streams.withLock { $0.removeValue(forKey: id) }
    }

    func lookup(_ id: UInt64) -> GenerationStream? {
        shard(id).streams.withLock { $0[id] }
    }

    var activeCount: Int { shards.reduce(0) { count, shard in count + shard.streams.withLock { $0.count } } }

    /// Every registered stream (each shard read under its own lock, so not one atomic snapshot).
    func lookupAll() -> [GenerationStream] {
        shards.flatMap { shard in shard.streams.withLock { Array($0.values) } }
    }

    /// A sink whose `ctx` carries `id`. Give it back with `recycle` after the terminal event.
    func makeSink(for id: UInt64) -> SinkPool.Sink { sinks.take(id: id) }

    func recycle(_ sink: SinkPool.Sink) { sinks.give(sink) }

    /// Keeps a sink out of the pool for good (its stream expired; the backend may still call it).
    func retire(_ sink: SinkPool.Sink) { sinks.retire(sink) }

    /// How many sinks were retired for good (tests).
    var retiredSinkCount: Int { sinks.retiredCount }

    /// Whether a recycled sink is waiting in the pool twice (tests).
    var hasDuplicateRecycledSinks: Bool { sinks.hasDuplicateFreeEntries }
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
