// SPDX-License-Identifier: Apache-2.0

/// What the gateway knows about one checked input image: its real format, its size in pixels and its bytes.
///
/// Everything here comes from the image data itself; the MIME type a client declared in the data URL is not
/// trusted and not kept.
public struct ImageInfo: Sendable, Hashable {
    /// The format found by magic bytes.
    public var format: ImageFormat
    /// The MIME type of ``format`` (for example `image/jpeg`), even if the data URL declared another one.
    public var mimeType: String
    /// The width in pixels (for animated images, the first frame's), in `1...ImageInspector.maximumDimension`.
    public var width: Int
    /// The height in pixels (for animated images, the first frame's), in `1...ImageInspector.maximumDimension`.
    public var height: Int
    /// The decoded image file, unchanged.
    public var bytes: [UInt8]

    /// Creates an image description; ``mimeType`` is derived from `format`.
    public init(format: ImageFormat, width: Int, height: Int, bytes: [UInt8]) {
        self.format = format
        self.mimeType = format.mimeType
        self.width = width
        self.height = height
        self.bytes = bytes
    }
}
