// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Receives process signals on a dedicated thread with `sigwait`, instead of handlers or a `SIG_IGN` disposition.
///
/// Call ``blockInCallingThread(_:)`` first in `main`, before any other thread exists: every thread then inherits
/// the block, a signal stays pending until the listener's `sigwait` takes it, and none is lost. Keep the main
/// thread out of `dispatchMain()` (and `async` main, which uses it): on Linux it waits in `sigsuspend` with an
/// empty mask and would take the signal itself. (With `SIG_IGN` and a Dispatch signal source, that is how a
/// `SIGTERM` sent right after start was sometimes discarded and the daemon never stopped.)
public enum SignalListener {
    /// Blocks `signals` in the calling thread; threads it creates afterwards inherit the block. The corresponding
    /// C function is `pthread_sigmask`.
    public static func blockInCallingThread(_ signals: [Int32]) {
        var set = signalSet(signals)
        pthread_sigmask(SIG_BLOCK, &set, nil)
    }

    /// Starts a thread that waits for `signals` (which must be blocked in every thread) and calls `handler` with
    /// each one, in the order they are taken. The corresponding C function is `sigwait`.
    public static func start(_ signals: [Int32], handler: @escaping @Sendable (Int32) -> Void) throws(SystemCallError) {
        try IOThread.spawn(name: "afm-signals") {
            var set = signalSet(signals)
            while true {
                var number: Int32 = 0
                if sigwait(&set, &number) == 0 { handler(number) }
            }
        }.detach()
    }

    private static func signalSet(_ signals: [Int32]) -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in signals { sigaddset(&set, signal) }
        return set
    }
}
