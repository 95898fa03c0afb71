// SPDX-License-Identifier: Apache-2.0

/// Which direction(s) of a connection ``FileDescriptor/shutdown(_:)`` closes.
public enum ShutdownDirection: Sendable {
    /// No more receives. The corresponding C constant is `SHUT_RD`.
    case read
    /// No more sends; the peer reads end-of-file after the queued data. The corresponding C constant is `SHUT_WR`.
    case write
    /// Both. The corresponding C constant is `SHUT_RDWR`.
    case both
}
