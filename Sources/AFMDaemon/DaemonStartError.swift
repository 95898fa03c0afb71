// SPDX-License-Identifier: Apache-2.0

/// Why the daemon will not start (or will not listen where it was asked to): printed as `cannot start: MESSAGE`.
public struct DaemonStartError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
