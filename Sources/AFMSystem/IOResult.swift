// SPDX-License-Identifier: Apache-2.0

/// The outcome of an I/O call on a non-blocking descriptor: either it made progress, or it would block.
///
/// "Would block" (`EAGAIN`/`EWOULDBLOCK`) is an ordinary outcome on non-blocking sockets, not an error, so it
/// is a value here and callers must handle it explicitly.
public enum IOResult<Value: Sendable>: Sendable {
    /// The call completed with this value (bytes read or written, an accepted descriptor, …).
    case processed(Value)
    /// The descriptor is not ready; wait for readiness (epoll) and try again.
    case wouldBlock
}

extension IOResult: Equatable where Value: Equatable {}
