// SPDX-License-Identifier: Apache-2.0
import AFMImages
import AFMJSON

/// The transcript items of one step's tool outputs: a `function_call_output` per call, and — for a model that
/// accepts images — one user message after them with the images the tools returned.
///
/// afmd's Responses API takes images only in user messages (`input_image` parts): a `function_call_output`
/// carries text. So an image in a tool output (an MCP tool's `image` content) is sent as an image in the message
/// that follows the step's outputs, each with a label naming its tool and call, and the output's text says where
/// it went (`[image 1 (image/png) is in the next message]`). A model that does not accept images (its
/// `/v1/models` capabilities lack `vision`, or the gateway could not be asked) reads a placeholder naming the
/// image and why it is not shown; the gateway would refuse the image with 400 `unsupported_capability`. An image
/// the gateway would refuse for itself (not PNG, JPEG, WebP or GIF by its first bytes, not base64, over 8 MiB,
/// a side over 16384 px: `ImageInspector`, the gateway's own check) is a placeholder with the reason too.
enum ToolOutputItems {
    /// At most this many images go in one request, across the whole history (afmd refuses more with 400
    /// `too_many_images`); the newest are kept.
    static let maximumImagesPerRequest = 4

    /// The items for `records` (in call order), for `model`.
    static func make(_ records: [ToolCallRecord], model: String, acceptsImages: Bool) -> [JSONValue] {
        var items: [JSONValue] = []
        var parts: [JSONValue] = []
        for record in records {
            let text = record.output.text { mimeType, base64 in
                let size = "[image \(mimeType), \(AgentToolOutput.byteCount(base64)) bytes, not shown: "
                guard acceptsImages else { return size + "the model \(model) does not accept images]" }
                // The gateway's own image policy (AFMImages): an image it would refuse would fail the whole step.
                do throws(ImageError) {
                    _ = try ImageInspector.inspect(dataURL: "data:\(mimeType);base64,\(base64)")
                } catch {
                    return size + "\(error.message)]"
                }
                let number = parts.count / 2 + 1
                parts.append([
                    "type": "input_text",
                    "text": .string("tool output image \(number), returned by \(record.call.name) (call \(record.call.callID)):"),
                ])
                parts.append(["type": "input_image", "image_url": .string("data:\(mimeType);base64,\(base64)")])
                return "[image \(number) (\(mimeType)) is in the next message]"
            }
            items.append(["type": "function_call_output", "call_id": .string(record.call.callID), "output": .string(text)])
        }
        if !parts.isEmpty { items.append(["type": "message", "role": "user", "content": .array(parts)]) }
        return items
    }

    /// `input` with at most ``maximumImagesPerRequest`` images, the newest: each older image part becomes a text
    /// part saying it is not shown (its label stays before it).
    static func limitingImages(_ input: [JSONValue]) -> [JSONValue] {
        var kept = 0
        var result = input
        for itemIndex in result.indices.reversed() {
            guard var item = result[itemIndex].objectValue, var parts = item["content"]?.arrayValue else { continue }
            var changed = false
            for partIndex in parts.indices.reversed() where parts[partIndex]["type"] == "input_image" {
                if kept < maximumImagesPerRequest {
                    kept += 1
                } else {
                    parts[partIndex] = [
                        "type": "input_text",
                        "text": .string(
                            "[image not shown: a request carries at most \(maximumImagesPerRequest) images, and newer ones came later]"),
                    ]
                    changed = true
                }
            }
            if changed {
                item["content"] = .array(parts)
                result[itemIndex] = .object(item)
            }
        }
        return result
    }
}
