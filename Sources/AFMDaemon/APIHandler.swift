// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMHTTP
import AFMJSON
import AFMLogging
import AFMResponses

/// Routes HTTP requests to the gateway's endpoints and renders every error as the OpenAI envelope.
///
/// | method | path                      | answer                                        |
/// |--------|---------------------------|-----------------------------------------------|
/// | GET    | /health                   | `{"status":"ok"}`                             |
/// | GET    | /status                   | version, backends, models, budgets            |
/// | GET    | /v1/models, /models       | OpenAI model list                             |
/// | POST   | /v1/responses, /responses | Responses API (JSON or SSE)                   |
struct APIHandler: Sendable {
    let registry: BackendRegistry
    let service: ResponsesService
    let status: @Sendable () -> JSONValue
    let logger: Logger

    /// The synchronous start of every request (`HTTPStartingHandler`). Everything that needs no waiting is answered
    /// right here, without a task: the small endpoints, refusals, and a non-streaming response whose backend
    /// answered from inside `generate`. A response that has to wait for its backend continues as a task.
    func start(_ request: HTTPRequest, _ writer: HTTPResponseWriter) -> HTTPHandlerStart {
        switch (request.method, request.path) {
        case ("POST", "/v1/responses"), ("POST", "/responses"):
            return startResponse(request, writer)
        case ("GET", "/health"), ("HEAD", "/health"):
            sendJSONNow(writer, status: 200, encoded: Self.healthBody)
        case ("GET", "/status"):
            sendJSONNow(writer, status: 200, encoded: status().encoded())
        case ("GET", "/v1/models"), ("GET", "/models"):
            sendJSONNow(writer, status: 200, encoded: modelList().encoded())
        case (_, "/health"), (_, "/status"), (_, "/v1/models"), (_, "/models"), (_, "/v1/responses"), (_, "/responses"):
            sendErrorNow(
                writer, AFMError(.invalidRequest, "Method \(request.method) is not allowed on \(request.path).", publicCode: "method_not_allowed", httpStatus: 405))
        default:
            sendErrorNow(
                writer, AFMError(.invalidRequest, "No endpoint \(request.method) \(request.path).", publicCode: "not_found", httpStatus: 404))
        }
        return .answered
    }

    private static let healthBody = Array(#"{"status":"ok"}"#.utf8)

    /// Validates, leases and starts without waiting; answers at once when the generation already ended.
    private func startResponse(_ request: HTTPRequest, _ writer: HTTPResponseWriter) -> HTTPHandlerStart {
        let prepared: ResponsesService.Prepared
        do {
            prepared = try service.prepare(body: request.body)
        } catch {
            refuse(request, writer, error)
            return .answered
        }
        if prepared.startMayBlock {
            // A runner-hosted backend: `generate` waits for the runner's reply, which must not hold up the loop.
            return .continueAsync {
                await writer.leaveEventLoop()
                guard let started = self.start(prepared, request, writer) else { return }
                await self.respond(started, writer)
            }
        }
        guard let started = start(prepared, request, writer) else { return .answered }
        if !started.request.stream, let (status, body, error) = service.completeIfEnded(started) {
            deliver(started, writer, status: status, body: body, error: error)
            return .answered
        }
        return .continueAsync { await self.respond(started, writer) }
    }

    /// Starts the generation, or answers the refusal and returns nil.
    private func start(
        _ prepared: ResponsesService.Prepared, _ request: HTTPRequest, _ writer: HTTPResponseWriter
    ) -> ResponsesService.Started? {
        do {
            return try service.start(prepared)
        } catch {
            refuse(request, writer, error)
            return nil
        }
    }

    private func refuse(_ request: HTTPRequest, _ writer: HTTPResponseWriter, _ error: AFMError) {
        logger.info("request refused", ["code": error.publicCode, "status": String(error.httpStatus), "connection": String(request.connectionID)])
        sendErrorNow(writer, error)
    }

    /// Answers a started request: as Server-Sent Events, or as one JSON body once the generation ended.
    private func respond(_ started: ResponsesService.Started, _ writer: HTTPResponseWriter) async {
        let extra = Self.extraHeaders(started)
        if started.request.stream {
            var headers = HTTPHeaders()
            for (name, value) in extra { headers.add(name: name, value: value) }
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
            let outcome = await service.stream(started) { bytes in try await writer.write(bytes) }
            try? await writer.finishStream()
            log(started, outcome)
        } else {
            let (status, body, error) = await service.complete(started)
            deliver(started, writer, status: status, body: body, error: error)
        }
    }

    /// Sends a non-streaming answer (or its error envelope) and logs the response.
    private func deliver(_ started: ResponsesService.Started, _ writer: HTTPResponseWriter, status: Int, body: [UInt8], error: AFMError?) {
        if let error {
            sendErrorNow(writer, error)
        } else {
            sendJSONNow(writer, status: status, encoded: body, extra: Self.extraHeaders(started))
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

    /// The OpenAI model list: the models that can answer now, plus the aliases that resolve now (`auto`,
    /// `on-device`, `private-cloud`). `/status` lists every model, usable or not.
    private func modelList() -> JSONValue {
        var data: [JSONValue] = registry.models().filter(\.available).map { entry in
            [
                "id": .string(entry.model.id),
                "object": "model",
                "created": 0,
                "owned_by": .string(entry.backend),
                "context_window": .number(JSONNumber(entry.model.contextTokens)),
                "max_input_tokens": .number(JSONNumber(entry.model.maxInputTokens)),
                "max_output_tokens": .number(JSONNumber(entry.model.maxOutputTokens)),
                "capabilities": entry.model.capabilities.json,
            ]
        }
        for alias in BackendRegistry.aliases {
            guard let target = try? registry.resolve(alias) else { continue }
            data.append(["id": .string(alias), "object": "model", "created": 0, "owned_by": "afm", "alias_of": .string(target)])
        }
        return ["object": "list", "data": .array(data)]
    }

    /// Sends a JSON answer; it never waits (a complete response is queued whatever the client's speed).
    private func sendJSONNow(_ writer: HTTPResponseWriter, status: Int, encoded body: [UInt8], extra: [(String, String)] = []) {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in extra { headers.add(name: name, value: value) }
        try? writer.respondNow(HTTPResponseHead(status: status, headers: headers), body: body)
    }

    private func sendErrorNow(_ writer: HTTPResponseWriter, _ error: AFMError) {
        var extra: [(String, String)] = []
        if let seconds = error.retryAfterSeconds { extra.append(("Retry-After", String(seconds))) }
        // A cancelled request has no client left to read this; 499 is only for the log.
        sendJSONNow(writer, status: error.httpStatus, encoded: error.envelope.encoded(), extra: extra)
    }
}
