// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMImages
import AFMJSON
import Foundation

/// Turns `input_image` parts into the generation request's image parts, enforcing the image policy:
/// base64 data URLs only, format by magic bytes, at most `maximumImages` per request, each at most 8 MiB
/// decoded and 1…16384 px on each side.
enum ImageParts {
    /// At most this many images across the whole history of one request.
    static let maximumImages = 4

    static func documentPart(_ part: JSONValue, param: String, index: Int) throws(AFMError) -> JSONValue {
        guard index <= maximumImages else {
            throw AFMError(
                .invalidRequest, "Too many images: at most \(maximumImages) input_image parts per request, across the whole history.",
                param: param, publicCode: "too_many_images")
        }
        if let fileID = part["file_id"], !fileID.isNull {
            throw AFMError(
                .invalidRequest, "file_id images are not supported: this gateway stores no files. Send a base64 data URL in image_url.",
                param: "\(param).file_id", publicCode: "unsupported_parameter")
        }
        guard let url = part["image_url"]?.stringValue else {
            throw AFMError(.invalidRequest, "'\(param).image_url' must be a data URL string.", param: "\(param).image_url", publicCode: "invalid_image_url")
        }
        if let detail = part["detail"], !detail.isNull, !["auto", "low", "high", "original"].contains(detail.stringValue ?? "") {
            throw AFMError(.invalidRequest, "Invalid '\(param).detail'.", param: "\(param).detail", publicCode: "invalid_value")
        }
        let info: ImageInfo
        do {
            info = try ImageInspector.inspect(dataURL: url)
        } catch {
            throw AFMError(.invalidRequest, error.message, param: "\(param).image_url", publicCode: error.code)
        }
        return [
            "type": "image", "mime_type": .string(info.mimeType), "width": .number(JSONNumber(info.width)),
            "height": .number(JSONNumber(info.height)), "data_base64": .string(Data(info.bytes).base64EncodedString()),
        ]
    }
}
