// SPDX-License-Identifier: Apache-2.0

/// An image part: the bytes live in a file named by their SHA-256, shared by every message that uses them.
public struct ImageReference: Sendable, Hashable {
    /// Lower-case hex SHA-256 of the bytes.
    public var hash: String
    public var mimeType: String
    public var width: Int
    public var height: Int
    public var byteCount: Int

    public init(hash: String, mimeType: String, width: Int, height: Int, byteCount: Int) {
        self.hash = hash
        self.mimeType = mimeType
        self.width = width
        self.height = height
        self.byteCount = byteCount
    }
}
