// SPDX-License-Identifier: Apache-2.0

/// An image ready to store and send: within the pixel and byte limits, in a format the gateway accepts.
public struct NormalizedImage: Sendable, Hashable {
    /// The encoded bytes.
    public var bytes: [UInt8]
    /// `image/png`, `image/jpeg`, `image/webp` or `image/gif`.
    public var mimeType: String
    public var width: Int
    public var height: Int
    /// Whether the bytes are the source file unchanged (it already fitted the limits).
    public var isOriginal: Bool

    public init(bytes: [UInt8], mimeType: String, width: Int, height: Int, isOriginal: Bool) {
        self.bytes = bytes
        self.mimeType = mimeType
        self.width = width
        self.height = height
        self.isOriginal = isOriginal
    }

    /// The usual file extension for the MIME type (`png`, `jpg`, `webp`, `gif`).
    public var fileExtension: String {
        switch mimeType {
        case "image/jpeg": "jpg"
        case "image/webp": "webp"
        case "image/gif": "gif"
        default: "png"
        }
    }
}
