// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

/// Talks to afmd: the model list, and streaming `POST /v1/responses` requests built from a window.
///
/// Why not `URLSession`: FoundationNetworking on Linux streams through libcurl on its own threads and
/// delegate queues, and cancelling mid-stream is asynchronous; the terminal loop needs one descriptor it can
/// `poll(2)` together with the keyboard and close the instant Ctrl-C arrives. A 200-line HTTP/1.1 client over
/// AFMSystem's sockets gives exactly that, with no threads (see ``HTTPExchange``).
public struct ResponsesClient: Sendable {
    public var url: ServerURL

    public init(url: ServerURL) {
        self.url = url
    }

    /// The model ids of `GET /v1/models`, in the server's order.
    public func listModels(timeoutMilliseconds: Int32 = 10_000) throws -> [String] {
        let exchange = try HTTPExchange(url: url, method: "GET", path: "/v1/models", body: nil, accept: "application/json")
        defer { exchange.close() }
        let body = try exchange.readToEnd(timeoutMilliseconds: timeoutMilliseconds)
        guard exchange.status == 200, let value = try? JSONParser.parse(body), let data = value["data"]?.arrayValue else {
            throw HistoryError("GET /v1/models answered HTTP \(exchange.status)")
        }
        return data.compactMap { $0["id"]?.stringValue }
    }

    /// Starts a streaming response for a request body (see ``requestBody(model:window:current:imageBytes:)``).
    public func startStream(body: [UInt8]) throws -> ResponseStream {
        let exchange = try HTTPExchange(url: url, method: "POST", path: "/v1/responses", body: body, accept: "text/event-stream")
        return ResponseStream(exchange: exchange)
    }

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
