// SPDX-License-Identifier: Apache-2.0

/// Memory for the events one ``Epoll/wait(into:timeoutMilliseconds:)`` returns, reused across waits.
///
/// Owns a raw C array of `struct epoll_event` (whose layout is platform-specific: packed on x86_64).
public struct EpollEventBuffer: ~Copyable {
    let storage: UnsafeMutableRawPointer
    /// How many events fit.
    public let capacity: Int
    /// How many events the last wait returned.
    public internal(set) var count = 0

    /// Allocates room for `capacity` events.
    public init(capacity: Int = 256) {
        precondition(capacity > 0, "an epoll event buffer needs room for at least one event")
        self.capacity = capacity
        storage = UnsafeMutableRawPointer.allocate(byteCount: capacity * LinuxSymbols.epollEventSize, alignment: 8)
    }

    deinit { storage.deallocate() }

    /// The readiness flags of event `index` (0..<count).
    public func events(at index: Int) -> EpollEvents {
        precondition(index >= 0 && index < count, "epoll event index out of range")
        let raw = storage.loadUnaligned(fromByteOffset: index * LinuxSymbols.epollEventSize, as: UInt32.self)
        return EpollEvents(rawValue: raw)
    }

    /// The user value registered for event `index` (0..<count).
    public func userData(at index: Int) -> UInt64 {
        precondition(index >= 0 && index < count, "epoll event index out of range")
        return storage.loadUnaligned(
            fromByteOffset: index * LinuxSymbols.epollEventSize + LinuxSymbols.epollEventDataOffset, as: UInt64.self)
    }
}
