// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// Runs one system call, retrying `EINTR`, turning `EAGAIN` into `.wouldBlock` and throwing everything else.
///
/// `EBADF` and `EFAULT` are programmer errors here (a descriptor used after close, a bad pointer): continuing
/// could read or write someone else's descriptor, so they trap instead of being thrown.
@inline(__always)
func systemCall<T: FixedWidthInteger & Sendable>(
    _ name: StaticString,
    _ body: () -> T
) throws(SystemCallError) -> IOResult<T> {
    while true {
        let result = body()
        if result >= 0 { return .processed(result) }
        let code = errno
        switch code {
        case EINTR:
            continue
        case EAGAIN, EWOULDBLOCK:
            return .wouldBlock
        case EBADF, EFAULT:
            preconditionFailure("unacceptable errno \(code) \(Errno(rawValue: code)) from \(name)")
        default:
            throw SystemCallError(call: "\(name)", errno: Errno(rawValue: code))
        }
    }
}

/// Like `systemCall` for calls that cannot return `EAGAIN` (or where it is an error): returns the value.
@inline(__always)
func blockingSystemCall<T: FixedWidthInteger & Sendable>(
    _ name: StaticString,
    _ body: () -> T
) throws(SystemCallError) -> T {
    switch try systemCall(name, body) {
    case .processed(let value): return value
    case .wouldBlock: throw SystemCallError(call: "\(name)", errno: .wouldBlock)
    }
}
