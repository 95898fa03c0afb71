// SPDX-License-Identifier: Apache-2.0
@preconcurrency import Glibc

/// An advisory whole-file lock (`flock(2)`) held through this object's own open file description.
///
/// Two `FileLock`s on one path conflict even inside one process (each opens the file itself), and the kernel
/// drops a lock when its holder exits, however it exits (`SIGKILL` included), so a lock held for a lifetime is
/// also a liveness signal for other processes.
///
/// ```swift
/// let lock = try FileLock(path: dir + "/images.lock")
/// if try lock.lock(.exclusive, wait: false) { … ; lock.unlock() }
/// ```
public final class FileLock {
    /// Shared locks coexist; an exclusive lock excludes every other lock.
    public enum Mode: Sendable {
        case shared
        case exclusive
    }

    private let descriptor: FileDescriptor
    /// The lock file.
    public let path: String

    /// Opens the lock file, creating it (mode 0600) when `create` is true.
    ///
    /// - Throws: `SystemCallError` (`ENOENT` when the file is missing and `create` is false).
    /// The corresponding C function is `open`.
    public init(path: String, create: Bool = true) throws(SystemCallError) {
        let flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0)
        descriptor = FileDescriptor(rawValue: try blockingSystemCall("open") { open(path, flags, mode_t(0o600)) })
        self.path = path
    }

    deinit {
        descriptor.close()
    }

    /// Takes the lock, or converts a held one to `mode`.
    ///
    /// - Parameter wait: false returns false at once when a conflicting lock is held elsewhere.
    /// - Returns: whether the lock is now held. The corresponding C function is `flock`.
    @discardableResult
    public func lock(_ mode: Mode, wait: Bool) throws(SystemCallError) -> Bool {
        let operation = (mode == .shared ? LOCK_SH : LOCK_EX) | (wait ? 0 : LOCK_NB)
        switch try systemCall("flock", { flock(descriptor.rawValue, operation) }) {
        case .processed: return true
        case .wouldBlock: return false
        }
    }

    /// Releases the lock (closing the descriptor in `deinit` releases it too). The corresponding C function is `flock`.
    public func unlock() {
        _ = flock(descriptor.rawValue, LOCK_UN)
    }
}

// The descriptor is owned and closed by this object; its lock state is not meant to be shared across threads.
@available(*, unavailable)
extension FileLock: Sendable {}
