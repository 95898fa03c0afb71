// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

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
