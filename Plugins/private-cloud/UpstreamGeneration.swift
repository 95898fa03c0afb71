// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import AFMSSE
import Foundation
import Synchronization

/// One accepted generation: it picks an upstream, streams the upstream's answer to the host as ABI events, and
/// sends exactly one terminal event.
///
/// ```
/// for upstream in order (healthy first), skipping upstreams whose daily quota is used up:
///     one request is charged to it (generate charged the first one)
///     POST <base>/responses | <base>/chat/completions (stream: true)
///     connect error, timeout, 408/429/5xx before the first event ─► mark it unhealthy, refund, try the next one
///     first event sent to the host ─► this upstream is committed: any later failure ends with ERROR
/// cancel() or emit() ≠ 0 ─► close the upstream request ─► USAGE (if known) ─► DONE/cancelled
/// the end ─► the request's tokens are charged to the upstream that served it
/// ```
///
/// A generation never switches upstream after its first event, so a stream never mixes two models.
final class UpstreamGeneration: Sendable {
    /// What the generation needs from its instance.
    struct Context: Sendable {
        var pool: UpstreamPool
        var credentials: Credentials
        var quota: QuotaStore
        var host: HostAPI
        var connectTimeoutMilliseconds: Int
        var readTimeoutSeconds: Int
        /// `MaxStreamBytes`: the most bytes one upstream response body may hold.
        var maxStreamBytes: Int
        /// `MaxEventBytes`: the most data bytes one event of that body may hold.
        var maxEventBytes: Int
    }

    /// The most bytes of a non-2xx answer's body that are read (for its message) before the transfer stops.
    static let maximumErrorBodyBytes = 8192

    let requestID: UInt64
    let responseID: String
    let sink: EventSink
    /// The request body for each upstream (index as in the pool), already in that upstream's protocol.
    let bodies: [[UInt8]]
    /// Upstream tool name → the host's name.
    let toolNames: [String: String]
    /// The upstreams to try (indices as in the pool), in order.
    let order: [Int]
    /// The request as charged to the first upstream with quota left.
    let charge: QuotaStore.Charge
    private let context: Context
    private let cancelled = Atomic<Bool>(false)
    private let transfer = Mutex<HTTPTransfer?>(nil)

    init(
        requestID: UInt64, responseID: String, sink: EventSink, bodies: [[UInt8]], toolNames: [String: String],
        order: [Int], charge: QuotaStore.Charge, context: Context
    ) {
        self.requestID = requestID
        self.responseID = responseID
        self.sink = sink
        self.bodies = bodies
        self.toolNames = toolNames
        self.order = order
        self.charge = charge
        self.context = context
    }

    /// True once `cancel()` was called.
    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    /// Stops the generation and closes its upstream request at once. Idempotent, non-blocking.
    func cancel() {
        cancelled.store(true, ordering: .releasing)
        transfer.withLock { $0?.cancel() }
    }

    // MARK: - Running

    /// Runs the generation to its terminal event (on the generation's own thread).
    func run() {
        var failures: [String] = []
        var remaining = order
        var next: QuotaStore.Charge? = charge
        while let current = next {
            guard let index = remaining.first(where: { context.pool.upstreams[$0].baseURL == current.upstream }) else {
                break
            }
            remaining.removeAll { $0 == index }
            if isCancelled {
                refund(current)
                return finishCancelled(usage: nil, charge: nil)
            }
            switch attempt(upstream: index, charge: current) {
            case .finished:
                return
            case .failover(let unredacted):
                // The reason may quote an upstream's error body, which may echo our Authorization header.
                let reason = context.credentials.redact(unredacted)
                let url = context.pool.upstreams[index].baseURL
                failures.append("\(url): \(reason)")
                refund(current)
                context.host.log(AFM_LOG_WARNING, "\(responseID): upstream \(url) failed before the first token (\(reason)); trying the next one")
            }
            if isCancelled { return finishCancelled(usage: nil, charge: nil) }
            // The next upstream with quota left; those used up are skipped like unhealthy ones.
            do {
                switch try context.quota.reserve(remaining.map { QuotaStore.Account(context.pool.upstreams[$0]) }) {
                case .charged(let charged):
                    next = charged
                case .usedUp(let reasons):
                    failures += reasons.map { "\($0) (daily quota used up)" }
                    next = nil
                }
            } catch {
                return fail(AFM_ERR_INTERNAL, "the quota could not be checked: \(error.message)")
            }
        }
        if isCancelled { return finishCancelled(usage: nil, charge: nil) }
        fail(AFM_ERR_MODEL_UNAVAILABLE, "no private-cloud upstream could serve the request: " + failures.joined(separator: "; "))
    }

    private enum Attempt {
        case finished
        case failover(String)
    }

    /// One upstream: streams its answer, or reports why another upstream should be tried.
    private func attempt(upstream index: Int, charge: QuotaStore.Charge) -> Attempt {
        let upstream = context.pool.upstreams[index]
        let http = HTTPTransfer()
        transfer.withLock { $0 = http }
        if isCancelled { http.cancel() }
        defer { transfer.withLock { $0 = nil } }

        var headers = ["Content-Type: application/json", "Accept: text/event-stream"]
        if let authorization = context.credentials.authorizationHeader { headers.append(authorization) }
        var parser = SSEParser(maximumTotalBytes: context.maxStreamBytes, maximumEventBytes: context.maxEventBytes)
        var translator: any StreamTranslator =
            upstream.wireProtocol == .responses
            ? ResponsesStreamTranslator(toolNames: toolNames) : ChatStreamTranslator(toolNames: toolNames)
        var started = false
        var clientGone = false
        var terminal: StreamOutput?
        var usage: EventSink.Usage?
        var errorBody: [UInt8] = []
        var loggedModel = false

        let outcome = http.run(
            HTTPTransfer.Request(
                url: upstream.baseURL + upstream.wireProtocol.path, headers: headers, body: bodies[index],
                connectTimeoutMilliseconds: context.connectTimeoutMilliseconds,
                idleTimeoutSeconds: context.readTimeoutSeconds)
        ) { [self] status, bytes in
            guard (200..<300).contains(status) else {
                // An error body is only read for its message: after 8 KiB the transfer stops (an endless body
                // would otherwise hold the request until the watchdog, with no failover).
                errorBody += bytes.prefix(Self.maximumErrorBodyBytes - errorBody.count)
                return errorBody.count < Self.maximumErrorBodyBytes
            }
            for event in parser.feed(bytes) {
                for output in translator.translate(event) {
                    switch output {
                    case .done, .failed:
                        terminal = output
                    case .usage(let counts):
                        usage = counts
                    case .upstreamModel(let model):
                        if !loggedModel {
                            loggedModel = true
                            context.host.log(
                                AFM_LOG_INFO,
                                context.credentials.redact(
                                    "\(responseID): served by \(upstream.baseURL) (\(upstream.wireProtocol.rawValue)), upstream model \"\(model)\""))
                        }
                    default:
                        started = true
                        if !emit(output) {
                            clientGone = true
                            return false
                        }
                    }
                }
            }
            // The terminal event ends the answer: stop reading at once, so DONE does not wait for an upstream that
            // keeps the connection open (keep-alive comments) and nothing it sends afterwards can turn a complete
            // answer into a failure. A runaway upstream (an endless stream, line or event) ends at the parser's
            // caps: stop reading too.
            return terminal == nil && parser.overflow == nil
        }

        /// Before the first event, a broken upstream is like one that failed to connect: mark it and try the next
        /// one. After it, the client already has part of an answer: end the generation with `code`.
        func failOver(_ reason: String, orFail code: afm_status, _ failure: String) -> Attempt {
            if !started {
                context.pool.markFailure(index, reason: reason)
                return .failover(reason)
            }
            chargeTokens(usage, to: charge)
            fail(code, failure)
            return .finished
        }

        if let overflow = parser.overflow, !clientGone, !isCancelled {
            let message = overflow.upstreamDescription
            return failOver(
                message, orFail: AFM_ERR_MODEL_UNAVAILABLE,
                "upstream \(upstream.baseURL) failed mid-stream: \(message); the generation was stopped")
        }

        switch outcome {
        case .cancelled:
            finishCancelled(usage: usage, charge: charge)
            return .finished
        case .stopped where clientGone:
            finishCancelled(usage: usage, charge: charge)
            return .finished
        case .completed(let status) where (200..<300).contains(status), .stopped(let status) where (200..<300).contains(status):
            switch terminal {
            case .done(let reason)?:
                if let usage { sink.emit(AFM_EVENT_USAGE, usage: usage) }
                chargeTokens(usage, to: charge)
                sink.emit(AFM_EVENT_DONE, code: reason)
                return .finished
            case .failed(let code, let message)?:
                return failOver(message, orFail: code, "upstream \(upstream.baseURL): \(message)")
            default:
                let message = "the upstream closed the stream before it finished"
                return failOver(message, orFail: AFM_ERR_MODEL_UNAVAILABLE, "upstream \(upstream.baseURL) failed mid-stream: \(message)")
            }
        case .completed(let status), .stopped(let status):
            let detail = UpstreamError.message(fromBody: errorBody, redacting: context.credentials).map { ": \($0)" } ?? ""
            let message = "HTTP \(status)\(UpstreamError.hint(status))\(detail)"
            if status == 408 || status == 429 || status >= 500 {
                context.pool.markFailure(index, reason: message)
                return .failover(message)
            }
            let code: afm_status =
                switch status {
                case 400, 413, 422: AFM_ERR_INVALID_REQUEST
                default: AFM_ERR_MODEL_UNAVAILABLE
                }
            fail(code, "upstream \(upstream.baseURL) refused the request: \(message)")
            return .finished
        case .failed(let message, let timedOut, _):
            let reason = timedOut ? "no data within the timeout (\(message))" : "connection failed: \(message)"
            if !started {
                context.pool.markFailure(index, reason: reason)
                return .failover(reason)
            }
            chargeTokens(usage, to: charge)
            fail(
                timedOut ? AFM_ERR_TIMEOUT : AFM_ERR_MODEL_UNAVAILABLE,
                "upstream \(upstream.baseURL) failed mid-stream: \(reason)")
            return .finished
        }
    }

    // MARK: - Events

    /// Sends one non-terminal output; false when the host asked to stop.
    private func emit(_ output: StreamOutput) -> Bool {
        switch output {
        case .text(let text): sink.emit(AFM_EVENT_TEXT_DELTA, text: text)
        case .toolBegin(let index, let name, let callID):
            sink.emit(AFM_EVENT_TOOL_CALL_BEGIN, index: index, text: callID, name: name)
        case .toolArguments(let index, let delta): sink.emit(AFM_EVENT_TOOL_CALL_ARGUMENTS, index: index, text: delta)
        case .toolEnd(let index): sink.emit(AFM_EVENT_TOOL_CALL_END, index: index)
        case .reasoningText(let text): sink.emit(AFM_EVENT_REASONING_TEXT, text: text)
        case .reasoningState(let bytes): sink.emit(AFM_EVENT_REASONING_STATE, text: bytes)
        case .usage(let usage): sink.emit(AFM_EVENT_USAGE, usage: usage)
        case .upstreamModel, .done, .failed: true
        }
    }

    private func finishCancelled(usage: EventSink.Usage?, charge: QuotaStore.Charge?) {
        if let usage { sink.emit(AFM_EVENT_USAGE, usage: usage) }
        if let charge { chargeTokens(usage, to: charge) }
        sink.emit(AFM_EVENT_DONE, code: AFM_FINISH_CANCELLED)
    }

    private func fail(_ code: afm_status, _ message: String) {
        let message = context.credentials.redact(message)
        context.host.log(AFM_LOG_WARNING, "\(responseID): \(message)")
        sink.emit(AFM_EVENT_ERROR, code: code, text: message)
    }

    /// Adds the request's input and output tokens to the count of the upstream it was charged to.
    private func chargeTokens(_ usage: EventSink.Usage?, to charge: QuotaStore.Charge) {
        guard let usage else { return }
        // The counts come from the upstream's JSON: a sum near Int64.max would trap (and take afmd with it), and
        // the day's total would overflow later; capped as the host caps a backend's counts (2^32 - 1).
        let cap = Int64(UInt32.max)
        let tokens = min(max(0, usage.inputTokens), cap) + min(max(0, usage.outputTokens), cap)
        do {
            try context.quota.chargeTokens(Int(tokens), to: charge)
        } catch {
            context.host.log(AFM_LOG_ERROR, "\(responseID): could not count \(tokens) tokens: \(error.message)")
        }
    }

    /// Takes back the request charged to an upstream that did not serve it.
    private func refund(_ charge: QuotaStore.Charge) {
        do {
            try context.quota.refund(charge)
        } catch {
            context.host.log(
                AFM_LOG_ERROR, "\(responseID): could not refund a request to \(charge.upstream): \(error.message)")
        }
    }
}
