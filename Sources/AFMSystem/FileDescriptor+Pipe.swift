// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

extension FileDescriptor {
    /// Writes all of `bytes` to a pipe (a child's standard input), waiting while the pipe is full.
    ///
    /// A pipe whose reader is gone gives `EPIPE` instead of `SIGPIPE`: the signal is blocked on the calling thread
    /// for the call and a pending one is consumed, so a dying child never ends this process, whatever the
    /// process's signal dispositions. Blocks: call it on a dedicated thread.
    /// The corresponding C functions are `pthread_sigmask`, `write` and `sigtimedwait`.
    public func writeAllToPipe(_ bytes: [UInt8]) throws(SystemCallError) {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previous = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previous)
        defer {
            var pending = sigset_t()
            sigpending(&pending)
            if sigismember(&pending, SIGPIPE) == 1 {
                var zero = timespec(tv_sec: 0, tv_nsec: 0)
                _ = sigtimedwait(&pipeSignal, nil, &zero)
            }
            pthread_sigmask(SIG_SETMASK, &previous, nil)
        }
        var offset = 0
        while offset < bytes.count {
            let attempt = bytes.withUnsafeBytes { buffer in
                Result { () throws(SystemCallError) in try writeFile(UnsafeRawBufferPointer(rebasing: buffer[offset...])) }
            }
            let result = try attempt.get()
            if case .processed(let count) = result { offset += count }
        }
    }
}
