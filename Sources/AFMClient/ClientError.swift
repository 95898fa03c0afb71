// SPDX-License-Identifier: Apache-2.0

/// A failure of the HTTP client: the gateway cannot be reached, or it answered something that is not HTTP/1.1.
public struct ClientError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
