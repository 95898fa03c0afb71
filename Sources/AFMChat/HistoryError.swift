// SPDX-License-Identifier: Apache-2.0

/// A failure of the history store that is not SQLite's own (missing conversation, missing image file, …).
public struct HistoryError: Error, Hashable, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) { self.message = message }

    public var description: String { message }
}
