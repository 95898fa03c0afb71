// SPDX-License-Identifier: Apache-2.0

/// Why an input image was refused: a stable machine-readable ``code`` for the 400 response and a message
/// for people.
///
/// The codes are the values in ``Code``; the Responses layer passes them through as the error `code`.
public struct ImageError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The stable error code, one of the constants in ``Code`` (for example `invalid_base64`).
    public var code: String
    /// A human-readable explanation that names what was wrong.
    public var message: String

    /// Creates an error with a code from ``Code`` and a message.
    public init(code: String, message: String) {
        self.code = code
        self.message = message
    }

    /// The message, prefixed with the code.
    public var description: String { "\(code): \(message)" }

    /// The error codes ``ImageInspector`` produces.
    public enum Code {
        /// The image URL is not a base64 `data:` URL (remote `http(s)` URLs included).
        public static let invalidImageURL = "invalid_image_url"
        /// The data URL's payload is not strict standard base64.
        public static let invalidBase64 = "invalid_base64"
        /// The decoded image is larger than ``ImageInspector/maximumDecodedBytes``.
        public static let imageTooLarge = "image_too_large"
        /// The bytes are not a PNG, JPEG, WebP or GIF file.
        public static let unsupportedImageFormat = "unsupported_image_format"
        /// The bytes start like a supported format but the header is truncated or broken.
        public static let invalidImage = "invalid_image"
        /// The width or height is 0 or larger than ``ImageInspector/maximumDimension``.
        public static let invalidImageDimensions = "invalid_image_dimensions"
    }

    static func invalidImageURL(_ message: String) -> ImageError {
        ImageError(code: Code.invalidImageURL, message: message)
    }

    static func invalidBase64(_ message: String) -> ImageError {
        ImageError(code: Code.invalidBase64, message: message)
    }

    static func invalidImage(_ format: ImageFormat, _ message: String) -> ImageError {
        ImageError(code: Code.invalidImage, message: "invalid \(format.rawValue.uppercased()) image: \(message)")
    }
}
