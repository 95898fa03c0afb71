// SPDX-License-Identifier: Apache-2.0

/// Readiness flags for ``Epoll`` registrations and events.
public struct EpollEvents: OptionSet, Sendable, Hashable {
    /// The C `events` bit mask.
    public let rawValue: UInt32
    /// Wraps a C `events` bit mask.
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Data can be read (or end-of-file is pending). The corresponding C constant is `EPOLLIN`.
    public static let readable = EpollEvents(rawValue: 0x001)
    /// Data can be written. The corresponding C constant is `EPOLLOUT`.
    public static let writable = EpollEvents(rawValue: 0x004)
    /// An error is pending on the descriptor; always reported. The corresponding C constant is `EPOLLERR`.
    public static let error = EpollEvents(rawValue: 0x008)
    /// Both directions are shut down or the peer reset; always reported. The corresponding C constant is `EPOLLHUP`.
    public static let hangup = EpollEvents(rawValue: 0x010)
    /// The peer shut down its sending side (FIN received). The corresponding C constant is `EPOLLRDHUP`.
    public static let readHangup = EpollEvents(rawValue: 0x2000)
    /// Report each readiness *change* once instead of as long as it lasts. The corresponding C constant is
    /// `EPOLLET`.
    public static let edgeTriggered = EpollEvents(rawValue: 1 << 31)
}
