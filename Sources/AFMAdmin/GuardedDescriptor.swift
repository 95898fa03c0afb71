// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Synchronization

/// A socket that one thread uses and closes while other threads may interrupt it (`shutdown`).
///
/// Without the guard, a `shutdown` issued just after the owner's `close` could hit a *reused* descriptor
/// number belonging to an unrelated socket. Here `shutdown` and `close` both check and act under one lock;
/// these are the only system calls made under it, and neither blocks.
final class GuardedDescriptor: Sendable {
    let descriptor: FileDescriptor
    private let open = Mutex(true)

    init(_ descriptor: FileDescriptor) { self.descriptor = descriptor }

    /// Shuts both directions down if the descriptor is still open (any thread).
    func interrupt() {
        open.withLock { isOpen in
            if isOpen { descriptor.shutdown(.both) }
        }
    }

    /// Closes the descriptor once (the owning thread).
    func close() {
        open.withLock { isOpen in
            if isOpen { descriptor.close() }
            isOpen = false
        }
    }
}
