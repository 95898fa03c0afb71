// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMImages
import AFMJSON
import Foundation

/// Turns image parts into the generation request's image parts, enforcing the image policy for every dialect:
/// base64 data URLs only, format by magic bytes, at most `maximumImages` per request, each at most 8 MiB
/// decoded and 1…16384 px on each side.
public enum ImageParts {
    /// At most this many images across the whole history of one request.
    public static let maximumImages = ImageBudget.maximumImagesPerRequest

    /// A Responses `input_image` part.
    static func documentPart(_ part: JSONValue, param: String, index: Int) throws(AFMError) -> JSONValue {
        try checkCount(index, param: param)
        if let fileID = part["file_id"], !fileID.isNull {
            throw AFMError(
                .invalidRequest, "file_id images are not supported: this gateway stores no files. Send a base64 data URL in image_url.",
                param: "\(param).file_id", publicCode: "unsupported_parameter")
        }
        guard let url = part["image_url"]?.stringValue else {
            throw AFMError(.invalidRequest, "'\(param).image_url' must be a data URL string.", param: "\(param).image_url", publicCode: "invalid_image_url")
        }
        try checkDetail(part["detail"], param: "\(param).detail")
        return try documentPart(dataURL: url, param: "\(param).image_url", index: index)
    }

    /// An image given as a data URL (`data:<mime>;base64,<payload>`); `index` counts the request's images from 1.
    ///
    /// - Throws: 400 naming `param` for a remote URL, a bad payload or format, or too many images.
    public static func documentPart(dataURL url: String, param: String, index: Int) throws(AFMError) -> JSONValue {
        try checkCount(index, param: param)
        let info: ImageInfo
        do {
            info = try ImageInspector.inspect(dataURL: url)
        } catch {
            throw AFMError(.invalidRequest, error.message, param: param, publicCode: error.code)
        }
        return [
            "type": "image", "mime_type": .string(info.mimeType), "width": .number(JSONNumber(info.width)),
            "height": .number(JSONNumber(info.height)), "data_base64": .string(Data(info.bytes).base64EncodedString()),
        ]
    }

    /// The OpenAI `detail` of an image: absent, null, `auto`, `low`, `high` or `original`.
    public static func checkDetail(_ detail: JSONValue?, param: String) throws(AFMError) {
        if let detail, !detail.isNull, !["auto", "low", "high", "original"].contains(detail.stringValue ?? "") {
            throw AFMError(.invalidRequest, "Invalid '\(param)'.", param: param, publicCode: "invalid_value")
        }
    }

    private static func checkCount(_ index: Int, param: String) throws(AFMError) {
        guard index <= maximumImages else {
            throw AFMError(
                .invalidRequest, "Too many images: at most \(maximumImages) images per request, across the whole history.",
                param: param, publicCode: "too_many_images")
        }
    }
}
