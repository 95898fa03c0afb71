// SPDX-License-Identifier: Apache-2.0
import Glibc

/// A mutual-exclusion lock with the API of `Synchronization.Mutex`, backed by a `pthread_mutex_t` that
/// ThreadSanitizer intercepts.
///
/// Why it exists: on Linux the standard library's `Mutex` is a futex driven by atomics inside the (uninstrumented)
/// standard library, so ThreadSanitizer never sees it lock or unlock; every access inside `withLock` then looks
/// like a race (four threads incrementing a counter under it get the right total and a report). Code keeps using
/// `Mutex` everywhere; in a ThreadSanitizer build (`make test-tsan` compiles with `-D AFM_TSAN_LOCKS`) each module's
/// `Mutex+TSan.swift` makes `Mutex` this type, so the locking becomes visible and what TSan still reports is real.
/// Ordinary builds never use it.
public struct VisibleMutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    private let storage: Storage<Value>

    /// Creates a lock protecting `initialValue`.
    public init(_ initialValue: consuming sending Value) {
        storage = Storage(initialValue)
    }

    /// Runs `body` with exclusive access to the value.
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(storage.mutex)
        defer { pthread_mutex_unlock(storage.mutex) }
        return try body(&storage.value)
    }

    /// Runs `body` with exclusive access if the lock is free at once; returns `nil` otherwise.
    public borrowing func withLockIfAvailable<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result? {
        guard pthread_mutex_trylock(storage.mutex) == 0 else { return nil }
        defer { pthread_mutex_unlock(storage.mutex) }
        return try body(&storage.value)
    }
}

/// The lock and the value at a stable address (a `pthread_mutex_t` must not move).
private final class Storage<Value: ~Copyable> {
    let mutex: UnsafeMutablePointer<pthread_mutex_t>
    var value: Value

    init(_ value: consuming Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }
}
