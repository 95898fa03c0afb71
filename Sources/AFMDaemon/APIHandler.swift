// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMDialects
import AFMHTTP
import AFMJSON
import AFMLogging
import AFMResponses

/// Routes HTTP requests to the gateway's endpoints and renders every error in the envelope of the path's dialect
/// (`APIDialect(path:)`: Anthropic's under `/v1/messages`, OpenAI's elsewhere).
///
/// | method | path                      | answer                                        |
/// |--------|---------------------------|-----------------------------------------------|
/// | GET    | /health                   | `{"status":"ok"}` (no key needed)             |
/// | GET    | /ready                    | 200 when a backend is ready and not draining, else 503 (no key needed) |
/// | GET    | /metrics                  | Prometheus text 0.0.4                         |
/// | GET    | /status                   | version, backends, models, budgets            |
/// | GET    | /v1/models, /models       | OpenAI model list                             |
/// | POST   | /v1/responses, /responses | Responses API (JSON or SSE)                   |
/// | POST   | /v1/chat/completions, /chat/completions | Chat Completions (JSON or SSE)  |
/// | POST   | /v1/messages              | Anthropic Messages (JSON or SSE)              |
/// | POST   | /v1/messages/count_tokens | `{"input_tokens": N}`                         |
/// | OPTIONS| any of the above           | CORS preflight (204) for an accepted `Origin` |
///
/// Before routing, ``BrowserRequestPolicy`` refuses foreign `Host`s and cross-site `Origin`s (403), and a POST must
/// be `application/json` (415). A request from an accepted `Origin` gets `Access-Control-Allow-Origin` with it.
/// Then ``APIGate`` checks the API key (401 `invalid_api_key` in the path's dialect's envelope), and a generation
/// request passes admission control (503 `busy` with `Retry-After`, or a wait in its backend's queue). Every
/// answer on a dialect's path is counted in `/metrics` (`afm_requests_total{dialect,code}`) and, when on, the
/// access log.
struct APIHandler: Sendable {
    let registry: BackendRegistry
    let service: ResponsesService
    let status: @Sendable () -> JSONValue
    let browserPolicy: BrowserRequestPolicy.Shared
    let gate: APIGate
    let logger: Logger

    /// The paths of the dialects: their answers are counted by dialect in `/metrics`.
    static let dialectPaths: Set<String> = [
        "/v1/responses", "/responses", "/v1/chat/completions", "/chat/completions", "/v1/messages", "/v1/messages/count_tokens",
    ]

    /// The synchronous start of every request (`HTTPStartingHandler`). Everything that needs no waiting is answered
    /// right here, without a task: the small endpoints, refusals, and a non-streaming response whose backend
    /// answered from inside `generate`. A response that has to wait for its backend continues as a task.
    func start(_ request: HTTPRequest, _ writer: HTTPResponseWriter) -> HTTPHandlerStart {
        let dialect = APIDialect(path: request.path)
        var context = RequestContext(dialect: dialect.rawValue)
        if let refusal = browserPolicy.refusal(for: request) {
            refuse(request, writer, AFMError(refusal), origin: nil, dialect: dialect, context: context)
            return .answered
        }
        // Present only when accepted: answers then carry the CORS fields a browser needs to read them.
        let origin = request.headers["Origin"]
        if request.method == "OPTIONS", let origin, Self.endpoints.contains(request.path) {
            sendPreflightNow(request, writer, origin: origin)
            return .answered
        }
        switch gate.check(request) {
        case .refused(let error):
            refuse(request, writer, error, origin: origin, dialect: dialect, context: context, extra: [("WWW-Authenticate", "Bearer")])
            return .answered
        case .allowed(let keyName):
            context.keyName = keyName
        }
        switch (request.method, request.path) {
        case ("POST", "/v1/responses"), ("POST", "/responses"):
            return startResponse(request, writer, origin: origin, dialect: .responses, context: context) { () throws(AFMError) in
                let decoded = try ResponsesRequest(body: request.body)
                return (decoded.pipeline, decoded.echo, ResponsesEncoder())
            }
        case ("POST", "/v1/chat/completions"), ("POST", "/chat/completions"):
            return startResponse(request, writer, origin: origin, dialect: .chatCompletions, context: context) { () throws(AFMError) in
                let decoded = try ChatCompletionsRequest(body: request.body)
                return (decoded.pipeline, .init(), ChatCompletionsEncoder(includeUsage: decoded.includeUsage))
            }
        case ("POST", "/v1/messages"):
            return startResponse(request, writer, origin: origin, dialect: .messages, context: context) { () throws(AFMError) in
                (try MessagesRequest(body: request.body).pipeline, .init(), MessagesEncoder())
            }
        case ("POST", "/v1/messages/count_tokens"):
            return countTokens(request, writer, origin: origin, context: context)
        case ("GET", "/health"), ("HEAD", "/health"):
            sendJSONNow(writer, status: 200, encoded: Self.healthBody, origin: origin)
        case ("GET", "/ready"), ("HEAD", "/ready"):
            let (ready, body) = readiness()
            sendJSONNow(writer, status: ready ? 200 : 503, encoded: body.encoded(), origin: origin)
        case ("GET", "/metrics"):
            var headers = HTTPHeaders()
            headers.add(name: "Content-Type", value: ServingMetrics.contentType)
            try? writer.respondNow(HTTPResponseHead(status: 200, headers: headers), body: metricsText())
        case ("GET", "/status"):
            sendJSONNow(writer, status: 200, encoded: status().encoded(), origin: origin)
        case ("GET", "/v1/models"), ("GET", "/models"):
            sendJSONNow(writer, status: 200, encoded: modelList(anthropic: Self.isAnthropic(request)).encoded(), origin: origin)
        case ("GET", let path) where path.hasPrefix("/v1/models/") || path.hasPrefix("/models/"):
            let id = String(path[path.index(after: path.lastIndex(of: "/")!)...])
            if let entry = modelList(anthropic: Self.isAnthropic(request))["data"]?.arrayValue?.first(where: { $0["id"]?.stringValue == id }) {
                sendJSONNow(writer, status: 200, encoded: entry.encoded(), origin: origin)
            } else {
                sendErrorNow(
                    writer, AFMError(.modelUnavailable, "The model '\(id)' does not exist or cannot answer now.", param: "model", publicCode: "model_not_found", httpStatus: 404),
                    origin: origin, dialect: Self.isAnthropic(request) ? .messages : dialect)
            }
        case (_, let path) where Self.endpoints.contains(path):
            refuse(
                request, writer,
                AFMError(.invalidRequest, "Method \(request.method) is not allowed on \(request.path).", publicCode: "method_not_allowed", httpStatus: 405),
                origin: origin, dialect: dialect, context: context)
        default:
            sendErrorNow(
                writer, AFMError(.invalidRequest, "No endpoint \(request.method) \(request.path).", publicCode: "not_found", httpStatus: 404),
                origin: origin, dialect: dialect)
        }
        return .answered
    }

    /// The answer to a CORS preflight from an accepted origin: the methods and request fields it may use.
    private func sendPreflightNow(_ request: HTTPRequest, _ writer: HTTPResponseWriter, origin: String) {
        var headers = HTTPHeaders()
        headers.add(name: "Access-Control-Allow-Origin", value: origin)
        headers.add(name: "Access-Control-Allow-Methods", value: "GET, HEAD, POST, OPTIONS")
        let requested = request.headers["Access-Control-Request-Headers"].map(Self.headerSafe) ?? ""
        headers.add(name: "Access-Control-Allow-Headers", value: requested.isEmpty ? "authorization, content-type" : requested)
        headers.add(name: "Access-Control-Max-Age", value: "600")
        headers.add(name: "Vary", value: "Origin, Access-Control-Request-Headers")
        try? writer.respondNow(HTTPResponseHead(status: 204, headers: headers), body: [])
    }

    private static let endpoints: Set<String> = [
        "/health", "/ready", "/metrics", "/status", "/v1/models", "/models", "/v1/responses", "/responses", "/v1/chat/completions", "/chat/completions",
        "/v1/messages", "/v1/messages/count_tokens",
    ]

    private static let healthBody = Array(#"{"status":"ok"}"#.utf8)

    /// Validates, leases and starts without waiting; answers at once when the generation already ended.
    /// `decode` is the dialect's decoder: the pipeline's request, what a Responses answer echoes, and the encoder
    /// that writes the answer in the dialect's wire format.
    func startResponse<Encoder: AnswerEncoder>(
        _ request: HTTPRequest, _ writer: HTTPResponseWriter, origin: String?, dialect: APIDialect, context: RequestContext,
        decode: () throws(AFMError) -> (PipelineRequest, ResponseBuilder.Echo, Encoder)
    ) -> HTTPHandlerStart {
        if let refusal = BrowserRequestPolicy.mediaTypeRefusal(for: request) {
            refuse(request, writer, AFMError(refusal), origin: origin, dialect: dialect, context: context)
            return .answered
        }
        let prepared: ResponsesService.Prepared
        let encoder: Encoder
        do {
            let (pipelineRequest, echo, dialectEncoder) = try decode()
            encoder = dialectEncoder
            prepared = try service.prepare(pipelineRequest, echo: echo, context: context)
        } catch {
            refuse(request, writer, error, origin: origin, dialect: dialect, context: context)
            return .answered
        }
        let ticket: AdmissionControl.Ticket
        switch admit(prepared, request, writer, origin: origin, dialect: dialect, context: context, whenQueued: {
            { prepared in
                guard let started = self.start(prepared, request, writer, origin: origin, dialect: dialect) else { return }
                await self.respond(started, writer, origin: origin, encoder: encoder)
            }
        }) {
        case .now(let admitted): ticket = admitted
        case .later(let start): return start
        }
        if prepared.startMayBlock {
            // A runner-hosted backend: `generate` waits for the runner's reply, which must not hold up the loop.
            return .continueAsync {
                await writer.leaveEventLoop()
                defer { ticket.release() }
                guard let started = self.start(prepared, request, writer, origin: origin, dialect: dialect) else { return }
                await self.respond(started, writer, origin: origin, encoder: encoder)
            }
        }
        guard var started = start(prepared, request, writer, origin: origin, dialect: dialect) else {
            ticket.release()
            return .answered
        }
        if !started.request.stream, let (status, body, error) = service.completeIfEnded(&started, encoder: encoder) {
            deliver(started, writer, status: status, body: body, error: error, origin: origin, dialect: dialect)
            ticket.release()
            return .answered
        }
        let waiting = started
        return .continueAsync {
            await self.respond(waiting, writer, origin: origin, encoder: encoder)
            ticket.release()
        }
    }

    /// What ``admit(_:_:_:origin:dialect:context:whenQueued:)`` decided: go on now holding the ticket, or what
    /// the handler returns (a refusal already sent, or the wait in the backend's queue).
    private enum Admission {
        case now(AdmissionControl.Ticket)
        case later(HTTPHandlerStart)
    }

    /// Admission for a prepared request (a generation, or a `count_tokens` count: both take a slot of the backend).
    /// A full backend refuses it (the lease goes back, the answer is the dialect's 503); a queued request leaves
    /// the event loop, waits, and runs the closure `whenQueued` makes holding its slot (with its queue time in the
    /// context), or gives its lease back when the client left while it waited. `whenQueued` is only called for a
    /// queued request: an escaping closure made for every request (a context allocated, the handler and the request
    /// copied into it, every reference retained and released) was a measurable part of a small request's CPU
    /// (docs/PERFORMANCE.md, session 9).
    private func admit(
        _ prepared: ResponsesService.Prepared, _ request: HTTPRequest, _ writer: HTTPResponseWriter, origin: String?,
        dialect: APIDialect, context: RequestContext, whenQueued: () -> @Sendable (ResponsesService.Prepared) async -> Void
    ) -> Admission {
        switch service.admission.admit(backend: prepared.backendID) {
        case .admitted(let ticket):
            return .now(ticket)
        case .refused(let error):
            service.release(prepared)
            refuse(request, writer, error, origin: origin, dialect: dialect, context: context, model: prepared.request.model)
            return .later(.answered)
        case .queued(let waiter):
            let whenQueued = whenQueued()
            return .later(.continueAsync {
                await writer.leaveEventLoop()
                var prepared = prepared
                guard let admitted = await waiter.wait() else {
                    self.service.release(prepared)  // the client left while queued
                    return
                }
                defer { admitted.release() }
                prepared.context.queueSeconds = context.elapsedSeconds
                await whenQueued(prepared)
            })
        }
    }

    /// `POST /v1/messages/count_tokens`: `{"input_tokens": N}`, counted as the backend would see the request.
    private func countTokens(
        _ request: HTTPRequest, _ writer: HTTPResponseWriter, origin: String?, context: RequestContext
    ) -> HTTPHandlerStart {
        if let refusal = BrowserRequestPolicy.mediaTypeRefusal(for: request) {
            refuse(request, writer, AFMError(refusal), origin: origin, dialect: .messages, context: context)
            return .answered
        }
        let prepared: ResponsesService.Prepared
        do {
            prepared = try service.prepare(MessagesRequest(body: request.body, counting: true).pipeline, context: context)
        } catch {
            refuse(request, writer, error, origin: origin, dialect: .messages, context: context)
            return .answered
        }
        let answer: @Sendable () -> Void = {
            do throws(AFMError) {
                let tokens = try self.service.countInputTokens(prepared)
                self.sendJSONNow(writer, status: 200, encoded: Array(#"{"input_tokens":\#(tokens)}"#.utf8), origin: origin)
                self.service.metrics.recordAnswered(
                    path: request.path, dialect: APIDialect.messages.rawValue, keyName: context.keyName, model: prepared.request.model,
                    status: 200, duration: context.elapsedSeconds)
            } catch {
                self.refuse(request, writer, error, origin: origin, dialect: .messages, context: context)
            }
        }
        // Counting takes a slot like a generation: a runner's tokenizer works through the whole body, so count
        // calls must not bypass `MaxConcurrent`/`MaxQueued` (a full backend answers 503 with Retry-After).
        let ticket: AdmissionControl.Ticket
        switch admit(prepared, request, writer, origin: origin, dialect: .messages, context: context, whenQueued: { { _ in answer() } }) {
        case .now(let admitted): ticket = admitted
        case .later(let start): return start
        }
        guard prepared.startMayBlock else {
            answer()
            ticket.release()
            return .answered
        }
        // A runner-hosted backend's tokenizer answers over its channel, which must not hold up the loop.
        return .continueAsync {
            await writer.leaveEventLoop()
            defer { ticket.release() }
            answer()
        }
    }

    /// Starts the generation, or answers the refusal and returns nil.
    private func start(
        _ prepared: ResponsesService.Prepared, _ request: HTTPRequest, _ writer: HTTPResponseWriter, origin: String?, dialect: APIDialect
    ) -> ResponsesService.Started? {
        do {
            return try service.start(prepared)
        } catch {
            refuse(request, writer, error, origin: origin, dialect: dialect)
            return nil
        }
    }

    /// Answers a refusal in the dialect's envelope and, with a `context`, books it (metrics, access log).
    func refuse(
        _ request: HTTPRequest, _ writer: HTTPResponseWriter, _ error: AFMError, origin: String?, dialect: APIDialect,
        context: RequestContext? = nil, extra: [(String, String)] = [], model: String? = nil
    ) {
        logger.info("request refused", ["code": error.publicCode, "status": String(error.httpStatus), "connection": String(request.connectionID)])
        sendErrorNow(writer, error, origin: origin, dialect: dialect, extra: extra)
        if let context {
            service.metrics.recordAnswered(
                path: request.path, dialect: Self.dialectPaths.contains(request.path) ? dialect.rawValue : nil, keyName: context.keyName,
                model: model, status: error.httpStatus, duration: context.elapsedSeconds)
        }
    }

    /// Answers a started request: as Server-Sent Events, or as one JSON body once the generation ended.
    private func respond(_ started: ResponsesService.Started, _ writer: HTTPResponseWriter, origin: String?, encoder: some AnswerEncoder) async {
        let extra = Self.extraHeaders(started)
        if started.request.stream {
            var headers = HTTPHeaders()
            for (name, value) in extra { headers.add(name: name, value: value) }
            if let origin { Self.addCORS(&headers, origin: origin) }
            headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
            headers.add(name: "Cache-Control", value: "no-cache")
            headers.add(name: "X-Accel-Buffering", value: "no")
            do {
                try await writer.startStream(HTTPResponseHead(status: 200, headers: headers))
            } catch {
                // The client left while the generation started (a runner's `generate` can take a while).
                await service.abandon(started)
                log(started, nil)
                return
            }
            // A stream the processing deadline cuts ends with the dialect's failure event (code `timeout`): the
            // server gives the cancelled handler `processingDeadlineGrace` to write it.
            let outcome = await service.stream(started, encoder: encoder, deadlinePassed: { writer.processingDeadlinePassed }) { bytes in
                try await writer.write(bytes)
            }
            try? await writer.finishStream()
            log(started, outcome)
        } else {
            let (status, body, error) = await service.complete(started, encoder: encoder)
            deliver(started, writer, status: status, body: body, error: error, origin: origin, dialect: encoder.dialect)
        }
    }

    /// Sends a non-streaming answer (or its error envelope) and logs the response.
    private func deliver(
        _ started: ResponsesService.Started, _ writer: HTTPResponseWriter, status: Int, body: [UInt8], error: AFMError?, origin: String?,
        dialect: APIDialect
    ) {
        if let error {
            sendErrorNow(writer, error, origin: origin, dialect: dialect)
        } else {
            sendJSONNow(writer, status: status, encoded: body, extra: Self.extraHeaders(started), origin: origin)
        }
        log(started, error.map { .failed($0) } ?? .completed)
    }

    /// `x-afm-warning` and `x-afm-truncated-turns`.
    private static func extraHeaders(_ started: ResponsesService.Started) -> [(String, String)] {
        var extra: [(String, String)] = started.warnings.map { ("x-afm-warning", headerSafe($0)) }
        if let dropped = started.truncatedTurns { extra.append(("x-afm-truncated-turns", String(dropped))) }
        return extra
    }

    private func log(_ started: ResponsesService.Started, _ outcome: ResponseBuilder.Outcome?) {
        guard logger.logs(.info) else { return }
        let text: String
        switch outcome {
        case .completed?: text = "completed"
        case .incomplete(let reason)?: text = "incomplete:\(reason)"
        case .failed(let error)?: text = "failed:\(error.publicCode)"
        case nil: text = "client_gone"
        }
        logger.info("response", ["id": started.builder.responseID, "model": started.request.model, "backend": started.backendID, "outcome": text])
    }

    /// Header values are one line of visible ASCII; anything else in a warning is replaced.
    static func headerSafe(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.prefix(400).map { $0.isASCII && $0.value >= 0x20 && $0.value != 0x7f ? $0 : "?" }))
    }

    /// Whether a request comes from an Anthropic client (the SDKs and Claude Code always send `anthropic-version`).
    private static func isAnthropic(_ request: HTTPRequest) -> Bool {
        request.headers["anthropic-version"] != nil
    }

    /// The model list: the models that can answer now, plus the aliases that resolve now (`auto`, `on-device`,
    /// `private-cloud`). `/status` lists every model, usable or not.
    ///
    /// Both client families read one list: it has OpenAI's `object` and Anthropic's `has_more`/`first_id`/
    /// `last_id`, and each entry OpenAI's `object`, `created`, `owned_by` and Anthropic's `type`, `display_name`,
    /// `created_at`. Only `capabilities` means two things (AFM's flags; Anthropic's capability object), so an
    /// Anthropic client (`anthropic` is true) gets Anthropic's entry: `lifecycle`, `max_input_tokens`, `max_tokens`,
    /// and no AFM capabilities.
    private func modelList(anthropic: Bool = false) -> JSONValue {
        var data: [JSONValue] = registry.models().filter(\.available).map { entry in
            var object: JSONObject = [
                "id": .string(entry.model.id), "object": "model", "created": 0, "owned_by": .string(entry.backend), "type": "model",
                "display_name": .string(entry.model.id), "created_at": "1970-01-01T00:00:00Z",
                "context_window": .number(JSONNumber(entry.model.contextTokens)),
                "max_input_tokens": .number(JSONNumber(entry.model.maxInputTokens)),
            ]
            if anthropic {
                object["lifecycle"] = "active"
                object["max_tokens"] = .number(JSONNumber(entry.model.maxOutputTokens))
            } else {
                object["max_output_tokens"] = .number(JSONNumber(entry.model.maxOutputTokens))
                object["capabilities"] = entry.model.capabilities.json
            }
            return .object(object)
        }
        for alias in BackendRegistry.aliases {
            guard let target = try? registry.resolve(alias) else { continue }
            var object: JSONObject = [
                "id": .string(alias), "object": "model", "created": 0, "owned_by": "afm", "type": "model", "display_name": .string(alias),
                "created_at": "1970-01-01T00:00:00Z", "alias_of": .string(target),
            ]
            if anthropic { object["lifecycle"] = "active" }
            data.append(.object(object))
        }
        return [
            "object": "list", "data": .array(data), "has_more": false, "first_id": data.first?["id"] ?? nil, "last_id": data.last?["id"] ?? nil,
        ]
    }

    /// Sends a JSON answer; it never waits (a complete response is queued whatever the client's speed). `origin` is
    /// an accepted `Origin`, which the answer then allows to read it.
    func sendJSONNow(
        _ writer: HTTPResponseWriter, status: Int, encoded body: [UInt8], extra: [(String, String)] = [], origin: String?
    ) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in extra { headers.add(name: name, value: value) }
        if let origin { Self.addCORS(&headers, origin: origin) }
        try? writer.respondNow(HTTPResponseHead(status: status, headers: headers), body: body)
    }

    /// Sends an error in the envelope of the dialect the request was for.
    func sendErrorNow(
        _ writer: HTTPResponseWriter, _ error: AFMError, origin: String?, dialect: APIDialect, extra: [(String, String)] = []
    ) {
        var extra = extra
        if let seconds = error.retryAfterSeconds { extra.append(("Retry-After", String(seconds))) }
        // A cancelled request has no client left to read this; 499 is only for the log.
        sendJSONNow(writer, status: error.httpStatus, encoded: dialect.errorBody(error), extra: extra, origin: origin)
    }

    // MARK: - Readiness and metrics

    /// `/ready`: ready when the node is not draining and at least one backend is ready.
    func readiness() -> (ready: Bool, body: JSONValue) {
        if gate.isDraining {
            return (false, ["status": "draining", "reason": "the node is draining: it finishes what it has and takes nothing new"])
        }
        let statuses = registry.statuses()
        let ready = statuses.filter { $0.state == "ready" }.map { JSONValue.string($0.id) }
        if ready.isEmpty {
            return (
                false,
                [
                    "status": "unavailable", "reason": "no backend is ready",
                    "backends": .array(statuses.map { ["id": .string($0.id), "state": .string($0.state)] }),
                ]
            )
        }
        return (true, ["status": "ready", "backends": .array(ready)])
    }

    /// The `/metrics` exposition: the pipeline's counters and histograms, then gauges read now.
    func metricsText() -> [UInt8] {
        let statuses = registry.statuses()
        let load = service.admission.load
        var running: [(labels: [(String, String)], value: Double)] = []
        var waiting: [(labels: [(String, String)], value: Double)] = []
        for id in Set(statuses.map(\.id)).union(load.keys).sorted() {
            running.append(([("backend", id)], Double(load[id]?.running ?? 0)))
            waiting.append(([("backend", id)], Double(load[id]?.waiting ?? 0)))
        }
        let gauges: [ServingMetrics.Gauge] = [
            .init(name: "afm_requests_running", help: "Requests holding an admission slot (generating).", samples: running),
            .init(name: "afm_requests_waiting", help: "Requests waiting for an admission slot.", samples: waiting),
            .init(
                name: "afm_backend_up", help: "1 when the backend is ready to serve, else 0.",
                samples: statuses.map { ([("backend", $0.id), ("state", $0.state)], $0.state == "ready" ? 1 : 0) }),
            .init(
                name: "afm_backend_generation", help: "The backend's active generation (it grows with every reload).",
                samples: statuses.map { ([("backend", $0.id)], Double($0.generation ?? 0)) }),
            .init(
                name: "afm_backend_restarts_total", help: "Restarts of the backend's runner after crashes.", type: "counter",
                samples: statuses.map { ([("backend", $0.id)], Double($0.restarts)) }),
            .init(name: "afm_draining", help: "1 while the node drains (/ready answers 503).", samples: [([], gate.isDraining ? 1 : 0)]),
        ]
        return service.metrics.render(gauges: gauges + PromptCacheMetrics.gauges(statuses))
    }

    /// Lets the page of an accepted origin read the answer (and tells caches the answer depends on `Origin`).
    private static func addCORS(_ headers: inout HTTPHeaders, origin: String) {
        headers.add(name: "Access-Control-Allow-Origin", value: origin)
        headers.add(name: "Access-Control-Expose-Headers", value: "x-afm-warning, x-afm-truncated-turns, Retry-After")
        headers.add(name: "Vary", value: "Origin")
    }
}
