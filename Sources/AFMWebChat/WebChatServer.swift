// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMHTTP
import AFMImageCodec
import AFMJSON
import AFMLogging
import AFMSystem
import Foundation
import Synchronization

/// `afm chat --web`: a single-page chat served by `afm` itself over the same history as the terminal chat.
///
/// ```
/// browser ── GET /, /app.js, /app.css, /icon.svg ─────────► embedded assets (WebChatAssets), strict CSP
///         ── /api/… (JSON; answers as Server-Sent Events) ─► WebChatServer ─► HistoryThread ─► history.sqlite
///                                                                         └─► WebTurn thread ─► afmd /v1/responses
/// ```
///
/// | method | path                                   | does                                                    |
/// |--------|----------------------------------------|---------------------------------------------------------|
/// | GET    | /api/models                            | the gateway's model ids (`GET /v1/models`)              |
/// | GET    | /api/conversations?offset=&limit=      | conversations newest first, 50 at a time, and the total |
/// | POST   | /api/conversations                     | a new, empty conversation                               |
/// | GET    | /api/conversations/ID                  | one conversation (with its draft)                       |
/// | DELETE | /api/conversations/ID                  | deletes it, its messages and unused images              |
/// | POST   | /api/conversations/ID/rename           | `{"title"}`                                             |
/// | PUT    | /api/conversations/ID/draft, /api/draft| `{"text"}`: the draft (of no conversation: /api/draft)  |
/// | GET    | /api/draft                             | the draft of no conversation                            |
/// | GET    | /api/conversations/ID/messages?before= | the newest 60 messages (before a sequence), oldest first|
/// | POST   | /api/conversations/ID/messages         | `{"text","images":[hash],"model"}`: SSE of the answer   |
/// | POST   | /api/conversations/ID/retry            | `{"model"}`: asks the last question again (SSE)         |
/// | POST   | /api/answers/ID/stop                   | stops an answer this server streams                     |
/// | GET    | /api/search?q=                         | FTS5 matches, words between U+E000 and U+E001           |
/// | POST   | /api/images                            | `{"data": base64}`: normalized like `/attach`, stored   |
/// | GET    | /api/images/HASH                       | the image's bytes                                       |
///
/// Every request passes ``BrowserRequestPolicy`` first (foreign `Host`: DNS rebinding; foreign `Origin`: another site
/// driving the chat), and every request that changes something must be `application/json`, which a page of another
/// site cannot send without a CORS preflight this server never grants. Answers carry a Content-Security-Policy that
/// lets the page load and connect to this server only.
public final class WebChatServer: Sendable {
    /// The Content-Security-Policy of every answer: nothing from elsewhere, no inline script or style.
    public static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' blob: data:; connect-src 'self'; "
        + "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// Marks around matched words in search snippets (private-use characters, never in text a model writes).
    static let highlightOpen = "\u{E000}"
    static let highlightClose = "\u{E001}"

    /// The longest title a conversation may be given (created or renamed): the history's own bound, checked here
    /// first for a 400 with its own code.
    static let maximumTitleCharacters = HistoryStore.maximumTitleCharacters

    private let history: HistoryThread
    private let client: ResponsesClient
    private let policy: BrowserRequestPolicy.Shared
    private let turns = Mutex<[String: WebTurn]>([:])
    private let server: Mutex<HTTPServer?> = Mutex(nil)
    private let logger: Logger

    /// Opens the history in `directory`; nothing listens until ``start(host:port:)``.
    public init(dataDirectory: String, client: ResponsesClient, logger: Logger = Logger(label: "afm-web", level: .warning)) throws {
        history = try HistoryThread(directory: dataDirectory)
        self.client = client
        self.logger = logger
        policy = BrowserRequestPolicy.Shared(BrowserRequestPolicy(listenHost: "127.0.0.1"))
    }

    /// Whether `host` (a listen address) is reachable from this machine only: `localhost`, 127.0.0.0/8, `::1`.
    public static func isLoopback(host: String) -> Bool {
        BrowserRequestPolicy.isLoopbackName(Substring(host))
    }

    /// Listens on `host:port` (port 0: any free one) and returns the port. The page has no login, so a host other
    /// machines reach (`0.0.0.0`, a LAN address) is refused unless `allowRemote` says the caller means it.
    @discardableResult
    public func start(host: String, port: Int, allowRemote: Bool = false) throws -> Int {
        guard allowRemote || Self.isLoopback(host: host) else {
            throw WebChatError(0, "remote_listen", "\(host) is reachable from other machines and the web chat has no login")
        }
        policy.set(BrowserRequestPolicy(listenHost: host))
        var configuration = HTTPServer.Configuration()
        // An image travels as base64 JSON: 32 MiB of file is about 43 MiB of body.
        configuration.maxBodyBytes = 48 * 1024 * 1024
        configuration.serverName = "afm"
        // A streamed answer may take long; the page's Stop button ends it, not a deadline.
        configuration.processingDeadline = .seconds(3600)
        let http = HTTPServer(configuration: configuration, logger: logger) { [self] request, writer in
            .continueAsync { await self.handle(request, writer) }
        }
        let bound = try http.start(host: host, port: port)
        server.withLock { $0 = http }
        return bound
    }

    /// Stops listening, stops the answers being streamed, and closes the history.
    public func stop() async {
        // Taken out, not just read: the server's handler holds this object, so keeping it would be a cycle that
        // outlives the stop (LeakSanitizer reported `afm chat --web`'s server and history at exit).
        let http = server.withLock { $0.take() }
        http?.stopListening()
        for turn in turns.withLock({ Array($0.values) }) { turn.stop() }
        await http?.shutdown(deadline: .seconds(2))
        await history.close()
    }

    // MARK: - Routing

    private func handle(_ request: HTTPRequest, _ writer: HTTPResponseWriter) async {
        if let refusal = policy.refusal(for: request) {
            logger.info("request refused", ["code": refusal.code])
            send(writer, status: refusal.status, body: refusal.body, type: "application/json")
            return
        }
        if request.method != "GET" && request.method != "HEAD", let refusal = BrowserRequestPolicy.mediaTypeRefusal(for: request) {
            send(writer, status: refusal.status, body: refusal.body, type: "application/json")
            return
        }
        let path = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        do {
            try await route(request, writer, path)
        } catch let error as WebChatError {
            sendError(writer, error)
        } catch {
            sendError(writer, WebChatError(500, "internal", "\(error)"))
        }
    }

    private func route(_ request: HTTPRequest, _ writer: HTTPResponseWriter, _ path: [String]) async throws {
        let method = request.method == "HEAD" ? "GET" : request.method
        switch (method, path.first) {
        case ("GET", nil): send(writer, status: 200, body: WebChatAssets.html, type: "text/html; charset=utf-8")
        case ("GET", "app.js"): send(writer, status: 200, body: WebChatAssets.script, type: "text/javascript; charset=utf-8")
        case ("GET", "app.css"): send(writer, status: 200, body: WebChatAssets.style, type: "text/css; charset=utf-8")
        case ("GET", "icon.svg"): send(writer, status: 200, body: WebChatAssets.icon, type: "image/svg+xml")
        case (_, "api"): try await api(request, writer, method: method, Array(path.dropFirst()))
        default: throw WebChatError(404, "not_found", "No page \(request.path).")
        }
    }

    private func api(_ request: HTTPRequest, _ writer: HTTPResponseWriter, method: String, _ path: [String]) async throws {
        let query = Self.queryItems(request.query)
        switch (method, path.count, path.first) {
        case ("GET", 1, "models"):
            sendJSON(writer, ["models": .array(try await models().map(JSONValue.string))])
        case ("GET", 1, "conversations"):
            let offset = max(0, Int(query["offset"] ?? "") ?? 0)
            let limit = min(max(1, Int(query["limit"] ?? "") ?? 50), 200)
            let (page, total) = try await history.perform { store in
                (try store.listConversations(limit: limit, offset: offset), try store.conversationCount())
            }
            sendJSON(writer, ["conversations": .array(page.map(WebChatJSON.conversation)), "total": .number(JSONNumber(total))])
        case ("POST", 1, "conversations"):
            let body = try Self.body(request)
            let title = (body["title"]?.stringValue ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            // The same bound as a rename: a title is shown in every list, in the page and in the terminal.
            guard HistoryStore.titleFits(title) else {
                throw WebChatError(400, "invalid_title", "A title has at most \(Self.maximumTitleCharacters) characters.")
            }
            let created = try await history.perform { try $0.createConversation(title: title) }
            sendJSON(writer, WebChatJSON.conversation(created), status: 201)
        case ("GET", 1, "draft"):
            let draft = try await history.perform { try $0.draft(conversationID: nil) }
            sendJSON(writer, ["text": .string(draft)])
        case ("PUT", 1, "draft"):
            let text = try Self.string(Self.body(request), "text")
            try await history.perform { try $0.saveDraft(text, conversationID: nil) }
            sendJSON(writer, ["saved": true])
        case ("GET", 1, "search"):
            let text = query["q"] ?? ""
            let hits = try await history.perform { store in
                try store.search(text, limit: 50, markers: (Self.highlightOpen, Self.highlightClose))
            }
            sendJSON(writer, ["hits": .array(hits.map(WebChatJSON.hit))])
        case ("POST", 1, "images"):
            try await uploadImage(request, writer)
        case ("GET", 2, "images"):
            try await image(writer, hash: path[1])
        case ("POST", 3, "answers") where path[2] == "stop":
            let turn = turns.withLock { $0[path[1]] }
            turn?.stop()
            sendJSON(writer, ["stopping": .bool(turn != nil)])
        case (_, 2..., "conversations"):
            try await conversation(request, writer, method: method, id: path[1], Array(path.dropFirst(2)), query: query)
        default:
            throw WebChatError(404, "not_found", "No endpoint \(request.method) \(request.path).")
        }
    }

    private func conversation(
        _ request: HTTPRequest, _ writer: HTTPResponseWriter, method: String, id: String, _ rest: [String], query: [String: String]
    ) async throws {
        switch (method, rest.first) {
        case ("GET", nil):
            guard let found = try await history.perform({ try $0.conversation(id: id) }), found.id == id else {
                throw WebChatError(404, "conversation_not_found", "No conversation \(id).")
            }
            sendJSON(writer, WebChatJSON.conversation(found))
        case ("DELETE", nil):
            try await history.perform { store in
                guard try store.conversation(id: id)?.id == id else { throw WebChatError(404, "conversation_not_found", "No conversation \(id).") }
                try store.delete(conversationID: id)
            }
            sendJSON(writer, ["deleted": true])
        case ("POST", "rename"):
            let title = try Self.string(Self.body(request), "title").trimmingCharacters(in: .whitespacesAndNewlines)
            guard !title.isEmpty, HistoryStore.titleFits(title) else {
                throw WebChatError(400, "invalid_title", "A title has 1 to \(Self.maximumTitleCharacters) characters.")
            }
            try await history.perform { store in
                guard try store.conversation(id: id)?.id == id else { throw WebChatError(404, "conversation_not_found", "No conversation \(id).") }
                try store.rename(conversationID: id, to: title)
            }
            sendJSON(writer, ["title": .string(title)])
        case ("PUT", "draft"):
            let text = try Self.string(Self.body(request), "text")
            try await history.perform { store in
                do {
                    try store.saveDraft(text, conversationID: id)
                } catch {
                    throw WebChatError(404, "conversation_not_found", "No conversation \(id).")
                }
            }
            sendJSON(writer, ["saved": true])
        case ("GET", "messages"):
            let before = query["before"].flatMap { Int64($0) }
            let limit = min(max(1, Int(query["limit"] ?? "") ?? 60), 200)
            let (messages, exists) = try await history.perform { store in
                (try store.messages(conversationID: id, before: before, limit: limit), try store.conversation(id: id)?.id == id)
            }
            guard exists else { throw WebChatError(404, "conversation_not_found", "No conversation \(id).") }
            let earliest = messages.first?.sequence ?? 0
            sendJSON(writer, ["messages": .array(messages.map(WebChatJSON.message)), "has_earlier": .bool(earliest > 0 && !messages.isEmpty)])
        case ("POST", "messages"):
            let body = try Self.body(request)
            let text = body["text"]?.stringValue ?? ""
            let hashes = (body["images"]?.arrayValue ?? []).compactMap(\.stringValue)
            guard !text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty || !hashes.isEmpty else {
                throw WebChatError(400, "empty_message", "A message needs text or an image.")
            }
            guard hashes.count <= InferenceWindow.maximumImages else {
                throw WebChatError(400, "too_many_images", "A message can carry at most \(InferenceWindow.maximumImages) images.")
            }
            try await answer(writer, conversationID: id, model: body["model"]?.stringValue, retry: false) { store in
                var parts: [ContentPart] = text.isEmpty ? [] : [.text(text)]
                for hash in hashes {
                    guard let image = try store.image(hash: hash) else { throw WebChatError(400, "image_not_found", "No image \(hash); attach it again.") }
                    parts.append(.image(image))
                }
                return parts
            }
        case ("POST", "retry"):
            let body = try Self.body(request)
            try await answer(writer, conversationID: id, model: body["model"]?.stringValue, retry: true) { store in
                let last = try store.messages(conversationID: id, limit: 2)
                guard let answer = last.last, answer.author == .assistant, answer.state.isRetryable,
                    let user = last.first, user.author == .user
                else { throw WebChatError(409, "nothing_to_retry", "Nothing to retry: the last answer is complete.") }
                return user.parts
            }
        default:
            throw WebChatError(404, "not_found", "No endpoint \(request.method) \(request.path).")
        }
    }

    // MARK: - Answers

    /// Stores the question and a pending answer, then streams the answer to the page as Server-Sent Events:
    /// `turn` (both messages), `notice`, `model`, `delta`…, `done` (the stored answer).
    private func answer(
        _ writer: HTTPResponseWriter, conversationID: String, model requested: String?, retry: Bool,
        parts: @escaping @Sendable (HistoryStore) throws -> [ContentPart]
    ) async throws {
        let model: String
        if let requested, !requested.isEmpty {
            model = requested
        } else {
            guard let first = try await models().first else {
                throw WebChatError(503, "model_unavailable", "The gateway at \(client.url) serves no models.")
            }
            model = first
        }
        let (earlier, user, answer, sent) = try await history.perform { store in
            guard try store.conversation(id: conversationID)?.id == conversationID else {
                throw WebChatError(404, "conversation_not_found", "No conversation \(conversationID).")
            }
            let sent = try parts(store)
            let earlier = try store.messages(conversationID: conversationID, limit: 1_000)
            let (user, answer) = try store.beginTurn(conversationID: conversationID, userParts: sent, model: model)
            // Typed text is recalled by Up/Down in the terminal chat too (a retry was not typed).
            let typed = sent.compactMap(\.text).joined()
            if !retry && !typed.isEmpty { try? store.recordInput(typed, conversationID: conversationID) }
            return (earlier, user, answer, sent)
        }
        let turn = WebTurn(answerID: answer.id)
        turns.withLock { $0[answer.id] = turn }
        defer { _ = turns.withLock { $0.removeValue(forKey: answer.id) } }
        let events = try turn.start(
            client: client, history: history, model: model, earlier: earlier, parts: sent, conversationID: conversationID, answer: answer)
        var headers = Self.securityHeaders()
        headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
        var connected = (try? await writer.startStream(HTTPResponseHead(status: 200, headers: headers))) != nil
        let first: JSONValue = ["type": "turn", "user": WebChatJSON.message(user), "answer": WebChatJSON.message(answer)]
        if connected { connected = (try? await writer.write(Array("data: ".utf8) + first.encoded() + Array("\n\n".utf8))) != nil }
        // The answer goes on (and is saved) when the page went away; the events are then only drained.
        for await event in events where connected {
            connected = (try? await writer.write(WebTurn.encode(event))) != nil
        }
        if connected { try? await writer.finishStream() }
    }

    /// The gateway's model ids; an unreachable gateway is 503 `model_unavailable` (not this server's fault).
    private func models() async throws -> [String] {
        let client = self.client
        do {
            return try await Self.blocking { try client.listModels() }
        } catch {
            throw WebChatError(503, "model_unavailable", "Cannot reach the gateway at \(client.url): \(error)")
        }
    }

    // MARK: - Images

    private func uploadImage(_ request: HTTPRequest, _ writer: HTTPResponseWriter) async throws {
        let encoded = try Self.string(Self.body(request, maxStringBytes: 48 * 1024 * 1024), "data")
        // A data URL (what FileReader gives) or bare base64.
        let base64 = encoded.firstIndex(of: ",").map { String(encoded[encoded.index(after: $0)...]) } ?? encoded
        guard let data = Data(base64Encoded: base64, options: .ignoreUnknownCharacters) else {
            throw WebChatError(400, "invalid_image", "The image is not valid base64.")
        }
        let normalized: NormalizedImage
        do {
            normalized = try await Self.blocking { try ImageNormalizer().normalize([UInt8](data)) }
        } catch let error as ImageCodecError {
            throw WebChatError(400, "invalid_image", error.message)
        }
        let reference = try await history.perform { store in
            try store.storeImage(normalized.bytes, mimeType: normalized.mimeType, width: normalized.width, height: normalized.height)
        }
        sendJSON(writer, WebChatJSON.image(reference), status: 201)
    }

    private func image(_ writer: HTTPResponseWriter, hash: String) async throws {
        guard hash.count == 64, hash.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
            throw WebChatError(404, "image_not_found", "No image \(hash).")
        }
        guard let reference = try await history.perform({ try $0.image(hash: hash) }) else {
            throw WebChatError(404, "image_not_found", "No image \(hash).")
        }
        let images = history.images
        let bytes = try await Self.blocking { try images.read(hash: reference.hash, mimeType: reference.mimeType) }
        var headers = Self.securityHeaders(cache: "private, max-age=31536000, immutable")
        headers.add(name: "Content-Type", value: reference.mimeType)
        try? await writer.respond(HTTPResponseHead(status: 200, headers: headers), body: bytes)
    }

    // MARK: - Answers and helpers

    /// The fields every answer carries.
    static func securityHeaders(cache: String = "no-store") -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Security-Policy", value: contentSecurityPolicy)
        headers.add(name: "X-Content-Type-Options", value: "nosniff")
        headers.add(name: "X-Frame-Options", value: "DENY")
        headers.add(name: "Referrer-Policy", value: "no-referrer")
        headers.add(name: "Cross-Origin-Opener-Policy", value: "same-origin")
        headers.add(name: "Cross-Origin-Resource-Policy", value: "same-origin")
        headers.add(name: "Cache-Control", value: cache)
        return headers
    }

    private func send(_ writer: HTTPResponseWriter, status: Int, body: [UInt8], type: String) {
        var headers = Self.securityHeaders()
        headers.add(name: "Content-Type", value: type)
        try? writer.respondNow(HTTPResponseHead(status: status, headers: headers), body: body)
    }

    private func sendJSON(_ writer: HTTPResponseWriter, _ value: JSONValue, status: Int = 200) {
        send(writer, status: status, body: value.encoded(), type: "application/json")
    }

    private func sendError(_ writer: HTTPResponseWriter, _ error: WebChatError) {
        send(
            writer, status: error.status,
            body: HTTPErrorBody.json(message: error.message, type: error.status >= 500 ? "server_error" : "invalid_request_error", code: error.code),
            type: "application/json")
    }

    private static func body(_ request: HTTPRequest, maxStringBytes: Int = 1024 * 1024) throws -> JSONValue {
        var limits = JSONParser.Limits()
        limits.maxStringBytes = maxStringBytes
        // The cap afmd puts on its request bodies: 48 MiB of `{}` would be a tree of gigabytes.
        limits.maxValues = JSONParser.Limits.maximumDocumentValues
        let value: JSONValue
        do {
            value = try JSONParser.parse(request.body, limits: limits)
        } catch {
            guard error.kind != .valueLimitExceeded else {
                throw WebChatError(
                    400, "too_many_values", "The body holds more than \(JSONParser.Limits.maximumDocumentValues) JSON values.")
            }
            throw WebChatError(400, "invalid_json", "The body must be a JSON object.")
        }
        guard value.objectValue != nil else { throw WebChatError(400, "invalid_json", "The body must be a JSON object.") }
        return value
    }

    private static func string(_ body: JSONValue, _ key: String) throws -> String {
        guard let value = body[key]?.stringValue else { throw WebChatError(400, "invalid_request", "\"\(key)\" must be a string.") }
        return value
    }

    /// `a=1&b=x%20y` as a dictionary (the last of a repeated name wins).
    static func queryItems(_ query: String?) -> [String: String] {
        var items: [String: String] = [:]
        for pair in (query ?? "").split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let decode = { (text: Substring) in String(text).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(text) }
            items[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return items
    }

    /// Runs blocking work (a call to the gateway, image decoding, a file read) on a thread of its own.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
            do {
                try IOThread.spawn(name: "afm-web-call") { continuation.resume(with: Result { try body() }) }.detach()
            } catch {
                continuation.resume(throwing: error)
            }
        }
    }
}

/// An API error: status, code and message in the JSON error envelope.
struct WebChatError: Error, Sendable {
    var status: Int
    var code: String
    var message: String

    init(_ status: Int, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }
}
