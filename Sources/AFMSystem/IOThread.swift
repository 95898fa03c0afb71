// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A dedicated operating-system thread, for work that blocks (`epoll_wait`) and so must never run on Swift's
/// cooperative thread pool.
///
/// Named `IOThread` to avoid shadowing Foundation's `Thread`. Spawned threads are joinable: call ``join()``
/// or ``detach()`` exactly once.
public final class IOThread: Sendable {
    private let thread: pthread_t

    private init(thread: pthread_t) { self.thread = thread }

    /// Starts a thread running `body`. The name (at most 15 bytes are kept) shows in `top -H` and debuggers.
    /// The corresponding C function is `pthread_create`.
    public static func spawn(name: String, _ body: @escaping @Sendable () -> Void) throws(SystemCallError) -> IOThread {
        let context = Unmanaged.passRetained(ThreadContext(name: name, body: body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread, nil,
            { raw in
                // The force unwrap is safe: pthread_create passes back the non-nil context pointer given below.
                let context = Unmanaged<ThreadContext>.fromOpaque(raw!).takeRetainedValue()
                let name = String(context.name.utf8.prefix(15))
                _ = LinuxSymbols.setThreadName(pthread_self(), name)
                // Nice is per thread on Linux and inherited from the creating thread, which may be a libdispatch
                // worker whose nice libdispatch sets by QoS: take the process's own (its main thread's) instead, so
                // `nice afmd` or systemd's `Nice=` reaches the event loops. Lowering it back needs privilege; without
                // it the thread keeps what it inherited.
                try? ResourceLimits.setNice(ResourceLimits.processNice())
                context.body()
                return nil
            }, context)
        guard result == 0 else {
            Unmanaged<ThreadContext>.fromOpaque(context).release()
            throw SystemCallError(call: "pthread_create", errno: Errno(rawValue: result))
        }
        return IOThread(thread: thread)
    }

    /// Waits for the thread to finish. The corresponding C function is `pthread_join`.
    public func join() {
        let result = pthread_join(thread, nil)
        precondition(result == 0, "pthread_join failed with \(result) (joined twice, or a thread joined itself)")
    }

    /// Lets the thread release its resources on exit without being joined. The corresponding C function is
    /// `pthread_detach`.
    public func detach() {
        let result = pthread_detach(thread)
        precondition(result == 0, "pthread_detach failed with \(result)")
    }

    /// Whether the caller is running on this thread.
    public var isCurrent: Bool { pthread_equal(thread, pthread_self()) != 0 }
}

private final class ThreadContext: Sendable {
    let name: String
    let body: @Sendable () -> Void

    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}
