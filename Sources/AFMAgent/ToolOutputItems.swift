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
    static let maximumImagesPerRequest = ImageBudget.maximumImagesPerRequest

    /// At most this many bytes of image data URLs go in one request, across the whole history; the newest images
    /// are kept. Each image passes the gateway's own check (8 MiB decoded), but a few together would exceed afmd's
    /// 16 MiB body limit (413 `request_too_large`, failing the step); 12 MiB leaves room for the text.
    static let maximumImageBytesPerRequest = 12 * 1024 * 1024

    /// The items for `records` (in call order), for `model`.
    static func make(_ records: [ToolCallRecord], model: String, acceptsImages: Bool) -> [JSONValue] {
        var items: [JSONValue] = []
        var parts: [JSONValue] = []
        for record in records {
            let text = record.output.text { rawType, base64 in
                let mimeType = Self.shown(rawType)
                let size = "[image \(mimeType), \(AgentToolOutput.byteCount(base64)) bytes, not shown: "
                guard acceptsImages else { return size + "the model \(model) does not accept images]" }
                // The gateway's own image policy (AFMImages): an image it would refuse would fail the whole step.
                let url = "data:\(rawType);base64,\(base64)"
                do throws(ImageError) {
                    _ = try ImageInspector.inspect(dataURL: url)
                } catch {
                    return size + "\(error.message)]"
                }
                guard url.utf8.count <= maximumImageBytesPerRequest else {
                    return size + "larger than the \(maximumImageBytesPerRequest / 1_048_576) MiB of images a request may carry]"
                }
                let number = parts.count / 2 + 1
                parts.append([
                    "type": "input_text",
                    "text": .string("tool output image \(number), returned by \(record.call.name) (call \(record.call.callID)):"),
                ])
                parts.append(["type": "input_image", "image_url": .string(url)])
                return "[image \(number) (\(mimeType)) is in the next message]"
            }
            items.append(["type": "function_call_output", "call_id": .string(record.call.callID), "output": .string(text)])
        }
        if !parts.isEmpty { items.append(["type": "message", "role": "user", "content": .array(parts)]) }
        return items
    }

    /// A tool's MIME type as the model reads it: printable ASCII only, at most 64 characters (a hostile server's
    /// type would otherwise fill the model's input).
    static func shown(_ mimeType: String) -> String {
        let printable = String(String.UnicodeScalarView(mimeType.unicodeScalars.filter { (0x21...0x7E).contains($0.value) }.prefix(64)))
        return printable.count < mimeType.count ? printable + "…" : printable
    }

    /// `turns` (oldest first, the current turn last) with at most ``maximumImagesPerRequest`` images and
    /// ``maximumImageBytesPerRequest`` bytes of them, the newest: each older image part becomes a text part saying
    /// it is not shown (its label stays before it). The agent applies it to every step's input before trimming (an
    /// image that will not be sent costs only its placeholder) and to its stored history (an image no request
    /// will carry again keeps no base64).
    static func limitingImages(_ turns: [[JSONValue]]) -> [[JSONValue]] {
        var kept = 0
        var bytes = 0
        var full = false
        var result = turns
        for turnIndex in result.indices.reversed() {
            for itemIndex in result[turnIndex].indices.reversed() {
                guard var item = result[turnIndex][itemIndex].objectValue, var parts = item["content"]?.arrayValue else { continue }
                var changed = false
                for partIndex in parts.indices.reversed() where parts[partIndex]["type"] == "input_image" {
                    let size = parts[partIndex]["image_url"]?.stringValue?.utf8.count ?? 0
                    // The newest that fit both limits; once one does not, every older one is left out too.
                    if !full && kept < maximumImagesPerRequest && bytes + size <= maximumImageBytesPerRequest {
                        kept += 1
                        bytes += size
                    } else {
                        full = true
                        parts[partIndex] = ["type": "input_text", "text": .string(notShown)]
                        changed = true
                    }
                }
                if changed {
                    item["content"] = .array(parts)
                    result[turnIndex][itemIndex] = .object(item)
                }
            }
        }
        return result
    }

    /// The text that replaces an image left out by ``limitingImages(_:)``.
    static let notShown =
        "[image not shown: a request carries at most \(maximumImagesPerRequest) images and "
        + "\(maximumImageBytesPerRequest / 1_048_576) MiB of image data, and newer ones came later]"
}
