// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A per-thread slot for an unretained reference: each thread sees the object it stored itself, or nil.
///
/// For a thread that owns an object for its whole life (an event loop and its private state) and lets code it
/// calls find it without passing it through every call. The slot does not retain the object: the thread that
/// stores it keeps it alive and clears the slot before releasing it.
public final class ThreadLocalReference<Object: AnyObject>: Sendable {
    private let key: pthread_key_t

    /// Creates a slot (one `pthread` key, never deleted: create slots once, as `static let`s).
    public init() {
        var key = pthread_key_t()
        let result = pthread_key_create(&key, nil)
        precondition(result == 0, "pthread_key_create failed with \(result)")
        self.key = key
    }

    /// The calling thread's object, or nil.
    public var current: Object? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<Object>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Stores `object` (or clears the slot) for the calling thread.
    public func set(_ object: Object?) {
        pthread_setspecific(key, object.map { UnsafeRawPointer(Unmanaged.passUnretained($0).toOpaque()) })
    }
}
