// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A POSIX error number, as reported in `errno` by a failed system call.
///
/// Its `description` is the C library's message (`strerror`), for example "Address already in use".
public struct Errno: Error, RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The raw C error number.
    public let rawValue: Int32

    /// Wraps a raw C error number.
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's current `errno`.
    public static var current: Errno { Errno(rawValue: errno) }

    /// The C library's message for this error number.
    public var description: String { String(cString: strerror(rawValue)) }

    /// The call was interrupted by a signal. The corresponding C error is `EINTR`.
    public static var interrupted: Errno { Errno(rawValue: EINTR) }
    /// The operation would block on a non-blocking descriptor. The corresponding C error is `EAGAIN`.
    public static var wouldBlock: Errno { Errno(rawValue: EAGAIN) }
    /// The descriptor is not open. The corresponding C error is `EBADF`.
    public static var badFileDescriptor: Errno { Errno(rawValue: EBADF) }
    /// A pointer argument was invalid. The corresponding C error is `EFAULT`.
    public static var badAddress: Errno { Errno(rawValue: EFAULT) }
    /// The address is already bound by another socket. The corresponding C error is `EADDRINUSE`.
    public static var addressInUse: Errno { Errno(rawValue: EADDRINUSE) }
    /// The address is not available on this host. The corresponding C error is `EADDRNOTAVAIL`.
    public static var addressNotAvailable: Errno { Errno(rawValue: EADDRNOTAVAIL) }
    /// Nothing listens on the remote address. The corresponding C error is `ECONNREFUSED`.
    public static var connectionRefused: Errno { Errno(rawValue: ECONNREFUSED) }
    /// The peer reset the connection. The corresponding C error is `ECONNRESET`.
    public static var connectionReset: Errno { Errno(rawValue: ECONNRESET) }
    /// The connection was aborted before `accept` returned it. The corresponding C error is `ECONNABORTED`.
    public static var connectionAborted: Errno { Errno(rawValue: ECONNABORTED) }
    /// Writing to a connection whose peer has gone. The corresponding C error is `EPIPE`.
    public static var brokenPipe: Errno { Errno(rawValue: EPIPE) }
    /// An argument was invalid. The corresponding C error is `EINVAL`.
    public static var invalidArgument: Errno { Errno(rawValue: EINVAL) }
    /// The process has too many open descriptors. The corresponding C error is `EMFILE`.
    public static var tooManyOpenFiles: Errno { Errno(rawValue: EMFILE) }
    /// The system has too many open descriptors. The corresponding C error is `ENFILE`.
    public static var tooManyOpenFilesInSystem: Errno { Errno(rawValue: ENFILE) }
    /// The operation is not permitted. The corresponding C error is `EPERM`.
    public static var notPermitted: Errno { Errno(rawValue: EPERM) }
    /// Permission denied. The corresponding C error is `EACCES`.
    public static var permissionDenied: Errno { Errno(rawValue: EACCES) }
    /// The operation is in progress (non-blocking `connect`). The corresponding C error is `EINPROGRESS`.
    public static var inProgress: Errno { Errno(rawValue: EINPROGRESS) }
    /// The socket is not connected. The corresponding C error is `ENOTCONN`.
    public static var notConnected: Errno { Errno(rawValue: ENOTCONN) }
    /// A timeout expired. The corresponding C error is `ETIMEDOUT`.
    public static var timedOut: Errno { Errno(rawValue: ETIMEDOUT) }
    /// Out of kernel buffer space. The corresponding C error is `ENOBUFS`.
    public static var noBufferSpace: Errno { Errno(rawValue: ENOBUFS) }
    /// Out of memory. The corresponding C error is `ENOMEM`.
    public static var noMemory: Errno { Errno(rawValue: ENOMEM) }
    /// A protocol error (`accept` on a broken handshake). The corresponding C error is `EPROTO`.
    public static var protocolError: Errno { Errno(rawValue: EPROTO) }

    /// Lets `catch Errno.wouldBlock` match a thrown `Errno` or a `SystemCallError` carrying it.
    public static func ~= (pattern: Errno, error: any Error) -> Bool {
        if let errno = error as? Errno { return errno == pattern }
        if let error = error as? SystemCallError { return error.errno == pattern }
        return false
    }
}
