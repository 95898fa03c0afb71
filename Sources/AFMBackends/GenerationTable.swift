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
