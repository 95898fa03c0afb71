// SPDX-License-Identifier: Apache-2.0

/// Why an image could not be attached.
public struct ImageCodecError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A human-readable explanation naming the limit or the problem.
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
