// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A per-thread permission for a task executor to run a resumed task on the thread that resumes it, instead of
/// handing it to another thread.
///
/// Why: on a busy 2-core machine every hand-off between threads is a wake-up and a context switch, and waiting
/// for the woken thread to be scheduled is most of a short request's latency. Where the resuming thread is
/// known to be a safe place to continue the task (a backend thread delivering the event a non-streaming
/// response waits for), the resumer grants the permission around `resume`, and an executor that honours it
/// (`AFMHTTP`'s handler executor) runs the task right there.
///
/// The permission is only ever granted around a single call, and it is withdrawn while a task runs inline, so
/// whatever that task resumes in turn goes to its executor as usual (no unbounded nesting).
public enum InlineResumption {
    /// A `pthread` key whose value is non-nil while the permission is granted.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        let result = pthread_key_create(&key, nil)
        precondition(result == 0, "pthread_key_create failed with \(result)")
        return key
    }()

    /// Whether the calling thread currently holds the permission.
    public static var isPermitted: Bool { pthread_getspecific(key) != nil }

    /// Runs `body` with the permission granted (`true`) or withdrawn (`false`) on this thread, then restores
    /// the previous state.
    public static func with<T>(permitted: Bool, _ body: () throws -> T) rethrows -> T {
        let previous = pthread_getspecific(key)
        // Any non-nil pointer marks the permission; it is never dereferenced.
        pthread_setspecific(key, permitted ? UnsafeRawPointer(bitPattern: 1) : nil)
        defer { pthread_setspecific(key, previous) }
        return try body()
    }
}
