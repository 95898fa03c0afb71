// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON
import Foundation

extension ResponsesClient {
    /// The JSON body: `model`, `stream: true`, `store: false`, and the window's turns then the new message as
    /// `input` items (images as base64 data URLs read through `imageBytes`).
    public static func requestBody(
        model: String, window: InferenceWindow, current: [ContentPart], imageBytes: (ImageReference) throws -> [UInt8]
    ) throws -> [UInt8] {
        var input: [JSONValue] = []
        for turn in window.turns {
            input.append(try item(role: "user", parts: turn.user.parts, imageBytes: imageBytes))
            input.append(try item(role: "assistant", parts: turn.answer.parts, imageBytes: imageBytes))
        }
        input.append(try item(role: "user", parts: current, imageBytes: imageBytes))
        let body: JSONValue = .object([
            "model": .string(model),
            "input": .array(input),
            "stream": .bool(true),
            "store": .bool(false),
        ])
        return body.encoded()
    }

    private static func item(role: String, parts: [ContentPart], imageBytes: (ImageReference) throws -> [UInt8]) throws -> JSONValue {
        var content: [JSONValue] = []
        for part in parts {
            switch part {
            case .text(let text):
                content.append(.object(["type": .string(role == "user" ? "input_text" : "output_text"), "text": .string(text)]))
            case .image(let image):
                let base64 = Data(try imageBytes(image)).base64EncodedString()
                content.append(
                    .object(["type": "input_image", "image_url": .string("data:\(image.mimeType);base64,\(base64)")]))
            }
        }
        return .object(["type": "message", "role": .string(role), "content": .array(content)])
    }
}
