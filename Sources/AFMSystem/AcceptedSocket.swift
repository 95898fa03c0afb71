// SPDX-License-Identifier: Apache-2.0

/// A connection returned by ``FileDescriptor/accept()``.
public struct AcceptedSocket: Sendable, Hashable {
    /// The new connection, non-blocking and close-on-exec.
    public var descriptor: FileDescriptor
    /// The peer's address, when the kernel reported an IPv4 or IPv6 one.
    public var peer: SocketAddress?
}
