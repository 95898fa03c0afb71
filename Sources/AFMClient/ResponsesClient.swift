// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem

/// Talks to afmd: the model list, and streaming `POST /v1/responses` requests.
///
/// Shared by `afm chat` (AFMChat) and the agent runtime (AFMAgent): one HTTP/SSE client, not two.
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
        try models(timeoutMilliseconds: timeoutMilliseconds).map(\.id)
    }

    /// The entries of `GET /v1/models` with their budgets, in the server's order. Blocks the calling thread up to
    /// the timeout: async callers use ``modelsAsync(timeoutMilliseconds:)``.
    public func models(timeoutMilliseconds: Int32 = 10_000) throws -> [ModelInfo] {
        let exchange = try HTTPExchange(url: url, method: "GET", path: "/v1/models", body: nil, accept: "application/json")
        defer { exchange.close() }
        let body = try exchange.readToEnd(timeoutMilliseconds: timeoutMilliseconds)
        // The list's body is capped (16 MiB), and its JSON by the shared cap on values, as a stream's events are.
        let value: JSONValue?
        do {
            value = try JSONParser.parse(body, limits: ResponseStream.eventLimits)
        } catch {
            guard error.kind != .valueLimitExceeded else {
                throw ClientError("GET /v1/models answered more than \(JSONParser.Limits.maximumDocumentValues) JSON values")
            }
            value = nil
        }
        guard exchange.status == 200, let value, let data = value["data"]?.arrayValue else {
            throw ClientError("GET /v1/models answered HTTP \(exchange.status)")
        }
        return data.compactMap(ModelInfo.init(json:))
    }

    /// ``models(timeoutMilliseconds:)`` on a dedicated thread, for async callers (never blocks the cooperative pool).
    public func modelsAsync(timeoutMilliseconds: Int32 = 10_000) async throws -> [ModelInfo] {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[ModelInfo], any Error>) in
            do {
                try IOThread.spawn(name: "afm-models") {
                    continuation.resume(with: Result { try models(timeoutMilliseconds: timeoutMilliseconds) })
                }.detach()
            } catch {
                continuation.resume(throwing: ClientError("cannot start a thread: \(error)"))
            }
        }
    }

    /// Streams a response (a Responses request body with `"stream": true`) from a dedicated thread; see
    /// ``ResponseEvents``.
    public func events(body: [UInt8]) -> ResponseEvents {
        ResponseEvents(client: self, body: body)
    }

    /// Starts a streaming response for a request body (a Responses request with `"stream": true`).
    public func startStream(body: [UInt8]) throws -> ResponseStream {
        let exchange = try HTTPExchange(url: url, method: "POST", path: "/v1/responses", body: body, accept: "text/event-stream")
        return ResponseStream(exchange: exchange)
    }
}
