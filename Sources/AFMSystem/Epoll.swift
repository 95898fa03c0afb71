// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// Readiness flags for ``Epoll`` registrations and events.
public struct EpollEvents: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Data can be read (or end-of-file is pending). The corresponding C constant is `EPOLLIN`.
    public static let readable = EpollEvents(rawValue: 0x001)
    /// Data can be written. The corresponding C constant is `EPOLLOUT`.
    public static let writable = EpollEvents(rawValue: 0x004)
    /// An error is pending on the descriptor; always reported. The corresponding C constant is `EPOLLERR`.
    public static let error = EpollEvents(rawValue: 0x008)
    /// Both directions are shut down or the peer reset; always reported. The corresponding C constant is `EPOLLHUP`.
    public static let hangup = EpollEvents(rawValue: 0x010)
    /// The peer shut down its sending side (FIN received). The corresponding C constant is `EPOLLRDHUP`.
    public static let readHangup = EpollEvents(rawValue: 0x2000)
    /// Report each readiness *change* once instead of as long as it lasts. The corresponding C constant is
    /// `EPOLLET`.
    public static let edgeTriggered = EpollEvents(rawValue: 1 << 31)
}

/// A Linux epoll instance (close-on-exec), closed when the object is released.
///
/// Registrations carry a 64-bit user value that comes back with each event. Use something that is never
/// reused (a connection id) rather than the descriptor number, so an event that was already queued for a
/// closed descriptor cannot be mistaken for one on a new socket that got the same number.
/// `add`/`modify`/`remove` may be called from any thread; ``wait(into:timeoutMilliseconds:)`` is meant for
/// one dedicated thread.
public final class Epoll: Sendable {
    /// The epoll descriptor itself.
    public let descriptor: FileDescriptor

    /// Creates an epoll instance. The corresponding C function is `epoll_create1` with `EPOLL_CLOEXEC`.
    public init() throws(SystemCallError) {
        let raw = try blockingSystemCall("epoll_create1") { LinuxSymbols.epollCreate1(LinuxSymbols.epollCloexec) }
        descriptor = FileDescriptor(rawValue: raw)
    }

    deinit { descriptor.close() }

    /// Starts watching `fd` for `events`. The corresponding C function is `epoll_ctl` with `EPOLL_CTL_ADD`.
    public func add(_ fd: FileDescriptor, events: EpollEvents, userData: UInt64) throws(SystemCallError) {
        try control(LinuxSymbols.epollCtlAdd, fd, events: events, userData: userData)
    }

    /// Changes what `fd` is watched for. The corresponding C function is `epoll_ctl` with `EPOLL_CTL_MOD`.
    public func modify(_ fd: FileDescriptor, events: EpollEvents, userData: UInt64) throws(SystemCallError) {
        try control(LinuxSymbols.epollCtlMod, fd, events: events, userData: userData)
    }

    /// Stops watching `fd` (closing a descriptor does this implicitly).
    /// The corresponding C function is `epoll_ctl` with `EPOLL_CTL_DEL`.
    public func remove(_ fd: FileDescriptor) throws(SystemCallError) {
        try control(LinuxSymbols.epollCtlDel, fd, events: [], userData: 0)
    }

    private func control(_ operation: Int32, _ fd: FileDescriptor, events: EpollEvents, userData: UInt64)
        throws(SystemCallError)
    {
        try withUnsafeTemporaryAllocation(byteCount: LinuxSymbols.epollEventSize, alignment: 8) {
            (event) throws(SystemCallError) -> Void in
            event.storeBytes(of: events.rawValue, toByteOffset: 0, as: UInt32.self)
            event.storeBytes(of: userData, toByteOffset: LinuxSymbols.epollEventDataOffset, as: UInt64.self)
            _ = try blockingSystemCall("epoll_ctl") {
                LinuxSymbols.epollCtl(descriptor.rawValue, operation, fd.rawValue, event.baseAddress)
            }
        }
    }

    /// Waits up to `timeoutMilliseconds` (-1: forever, 0: poll) and fills `buffer` with ready events.
    ///
    /// Blocks the calling thread: call it only from a dedicated I/O thread, never from a Swift task.
    /// `EINTR` counts as a timeout (returns 0) so the caller's timers still run.
    /// - Returns: the number of events now in `buffer`.
    /// The corresponding C function is `epoll_wait`.
    public func wait(into buffer: inout EpollEventBuffer, timeoutMilliseconds: Int32) throws(SystemCallError) -> Int {
        let result = LinuxSymbols.epollWait(
            descriptor.rawValue, buffer.storage, Int32(buffer.capacity), timeoutMilliseconds)
        if result >= 0 {
            buffer.count = Int(result)
            return Int(result)
        }
        let code = errno
        buffer.count = 0
        if code == EINTR { return 0 }
        precondition(code != EBADF && code != EFAULT, "epoll_wait: unacceptable errno \(code)")
        throw SystemCallError(call: "epoll_wait", errno: Errno(rawValue: code))
    }
}

/// Memory for the events one ``Epoll/wait(into:timeoutMilliseconds:)`` returns, reused across waits.
///
/// Owns a raw C array of `struct epoll_event` (whose layout is platform-specific: packed on x86_64).
public struct EpollEventBuffer: ~Copyable {
    fileprivate let storage: UnsafeMutableRawPointer
    /// How many events fit.
    public let capacity: Int
    /// How many events the last wait returned.
    public fileprivate(set) var count = 0

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
