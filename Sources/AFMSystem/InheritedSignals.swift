// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Undoes the signal state a command-line program inherits from whoever started it.
///
/// `exec` keeps the signal mask and every ignored disposition. A program started from a libdispatch worker thread
/// (a Swift test, a Foundation `Process` in an async context) inherits that thread's mask, in which nearly every
/// signal is blocked: such an `afmctl top` never saw `SIGTERM`. A parent that ignores `SIGPIPE` (as afmd does) makes
/// its child's write to a closed pipe fail with `EPIPE` instead of ending it quietly, as a filter in a pipeline should.
///
/// ``reset()`` therefore unblocks every signal and restores the default action of `SIGTERM` and `SIGPIPE`. An ignored
/// `SIGINT`, `SIGQUIT` or `SIGHUP` is kept: a shell ignores the first two for a background job of a script, and
/// `nohup` the last, on purpose (the GNU convention: a signal ignored on entry stays ignored).
public enum InheritedSignals {
    /// Unblocks every signal in the calling thread and restores the default action of `SIGTERM` and `SIGPIPE`.
    ///
    /// Call it first in `main`, before the process has another thread: threads inherit the caller's mask. The
    /// corresponding C functions are `pthread_sigmask` and `signal`.
    public static func reset() {
        var empty = sigset_t()
        sigemptyset(&empty)
        pthread_sigmask(SIG_SETMASK, &empty, nil)
        for number in [SIGTERM, SIGPIPE] { _ = signal(number, SIG_DFL) }
    }

    /// Whether `signal` is ignored (`SIG_IGN`), as a shell leaves `SIGINT` for a background job of a script.
    /// The corresponding C function is `sigaction`.
    public static func isIgnored(_ signal: Int32) -> Bool {
        var current = sigaction()
        guard sigaction(signal, nil, &current) == 0 else { return false }
        return unsafeBitCast(current.__sigaction_handler.sa_handler, to: Int.self) == unsafeBitCast(SIG_IGN, to: Int.self)
    }
}
