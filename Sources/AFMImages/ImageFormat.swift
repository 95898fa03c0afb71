// SPDX-License-Identifier: Apache-2.0

/// An image container format the gateway accepts, as recognised by its magic bytes.
public enum ImageFormat: String, Sendable, Hashable, CaseIterable {
    /// PNG (also APNG, whose first frame is the default image described by `IHDR`).
    case png
    /// JPEG (JFIF, Exif and raw JPEG streams alike; any SOF0–SOF15 frame).
    case jpeg
    /// WebP (lossy `VP8 `, lossless `VP8L` or extended `VP8X`).
    case webp
    /// GIF (GIF87a and GIF89a, still or animated).
    case gif

    /// The canonical MIME type, for example `image/png`. Backends receive this, not the declared type.
    public var mimeType: String {
        switch self {
        case .png: "image/png"
        case .jpeg: "image/jpeg"
        case .webp: "image/webp"
        case .gif: "image/gif"
        }
    }
}
