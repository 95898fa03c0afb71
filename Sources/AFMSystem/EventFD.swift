// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A Linux `eventfd` used to wake an epoll thread from other threads; closed when the object is released.
///
/// Non-blocking and close-on-exec. ``signal()`` may be called from any thread and any number of times; the
/// waiting thread sees one readable event and calls ``drain()``.
public final class EventFD: Sendable {
    /// The eventfd descriptor, to register with ``Epoll`` for `.readable`.
    public let descriptor: FileDescriptor

    /// Creates the eventfd. The corresponding C function is `eventfd` with `EFD_CLOEXEC | EFD_NONBLOCK`.
    public init() throws(SystemCallError) {
        let raw = try blockingSystemCall("eventfd") {
            LinuxSymbols.eventfd(0, LinuxSymbols.eventfdCloexec | LinuxSymbols.eventfdNonblock)
        }
        descriptor = FileDescriptor(rawValue: raw)
    }

    deinit { descriptor.close() }

    /// Adds one to the counter, making the descriptor readable. The corresponding C function is `write`.
    public func signal() {
        var one: UInt64 = 1
        // EAGAIN only happens when the counter is about to overflow 2^64-2, i.e. never in practice; a wakeup
        // is already pending in that case anyway.
        _ = try? systemCall("write") { Glibc.write(descriptor.rawValue, &one, 8) }
    }

    /// Resets the counter so the descriptor is no longer readable. The corresponding C function is `read`.
    public func drain() {
        var value: UInt64 = 0
        _ = try? systemCall("read") { Glibc.read(descriptor.rawValue, &value, 8) }
    }
}
