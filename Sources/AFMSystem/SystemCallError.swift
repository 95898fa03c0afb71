// SPDX-License-Identifier: Apache-2.0

/// A failed system call: which call, and the `errno` it reported.
///
/// Prints as "`epoll_ctl`: Bad file descriptor (errno 9)" so log lines name the call and the reason.
public struct SystemCallError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The C function that failed, for example `epoll_ctl`.
    public var call: String
    /// The error it reported.
    public var errno: Errno

    /// Creates an error for `call` failing with `errno`.
    public init(call: String, errno: Errno) {
        self.call = call
        self.errno = errno
    }

    /// "`epoll_ctl`: Bad file descriptor (errno 9)".
    public var description: String { "`\(call)`: \(errno) (errno \(errno.rawValue))" }
}
