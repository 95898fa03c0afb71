// SPDX-License-Identifier: Apache-2.0

/// What ``FileDescriptor/poll(readable:writable:timeoutMilliseconds:)`` saw.
public struct PollResult: Sendable, Hashable {
    /// Data (or end-of-file, or an error) can be read.
    public var readable: Bool
    /// Data can be written (or an error is pending).
    public var writable: Bool
    /// The peer hung up or an error is pending.
    public var hangup: Bool
}
