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

    func handle(_ request: HTTPRequest, _ writer: HTTPResponseWriter) async {
        switch (request.method, request.path) {
        case ("GET", "/health"), ("HEAD", "/health"):
            await sendJSON(writer, status: 200, ["status": "ok"])
        case ("GET", "/status"):
            await sendJSON(writer, status: 200, status())
        case ("GET", "/v1/models"), ("GET", "/models"):
            await sendJSON(writer, status: 200, modelList())
        case ("POST", "/v1/responses"), ("POST", "/responses"):
            await respond(request, writer)
        case (_, "/health"), (_, "/status"), (_, "/v1/models"), (_, "/models"), (_, "/v1/responses"), (_, "/responses"):
            await sendError(
                writer, AFMError(.invalidRequest, "Method \(request.method) is not allowed on \(request.path).", publicCode: "method_not_allowed", httpStatus: 405))
        default:
            await sendError(
                writer, AFMError(.invalidRequest, "No endpoint \(request.method) \(request.path).", publicCode: "not_found", httpStatus: 404))
        }
    }

    private func respond(_ request: HTTPRequest, _ writer: HTTPResponseWriter) async {
        let started: ResponsesService.Started
        do {
            started = try await service.start(body: request.body) { await writer.leaveEventLoop() }
        } catch {
            logger.info("request refused", ["code": error.publicCode, "status": String(error.httpStatus), "connection": String(request.connectionID)])
            await sendError(writer, error)
            return
        }
        var extra: [(String, String)] = started.warnings.map { ("x-afm-warning", Self.headerSafe($0)) }
        if let dropped = started.truncatedTurns { extra.append(("x-afm-truncated-turns", String(dropped))) }
        if started.request.stream {
            var headers = HTTPHeaders()
            for (name, value) in extra { headers.add(name: name, value: value) }
            headers.add(name: "Content-Type", value: "text/event-stream; charset=utf-8")
            headers.add(name: "Cache-Control", value: "no-cache")
            headers.add(name: "X-Accel-Buffering", value: "no")
            do {
                try await writer.startStream(HTTPResponseHead(status: 200, headers: headers))
            } catch {
                started.stream.cancel()
                return
            }
            let outcome = await service.stream(started) { bytes in try await writer.write(bytes) }
            try? await writer.finishStream()
            log(started, outcome)
        } else {
            let (status, body, error) = await service.complete(started)
            if let error {
                await sendError(writer, error)
            } else {
                await sendJSON(writer, status: status, encoded: body, extra: extra)
            }
            log(started, error.map { .failed($0) } ?? .completed)
        }
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

    private func sendJSON(_ writer: HTTPResponseWriter, status: Int, _ body: JSONValue, extra: [(String, String)] = []) async {
        await sendJSON(writer, status: status, encoded: body.encoded(), extra: extra)
    }

    private func sendJSON(_ writer: HTTPResponseWriter, status: Int, encoded body: [UInt8], extra: [(String, String)] = []) async {
        var headers = HTTPHeaders()
        headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in extra { headers.add(name: name, value: value) }
        try? await writer.respond(HTTPResponseHead(status: status, headers: headers), body: body)
    }

    private func sendError(_ writer: HTTPResponseWriter, _ error: AFMError) async {
        var extra: [(String, String)] = []
        if let seconds = error.retryAfterSeconds { extra.append(("Retry-After", String(seconds))) }
        // A cancelled request has no client left to read this; 499 is only for the log.
        await sendJSON(writer, status: error.httpStatus, error.envelope, extra: extra)
    }
}
