// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Dispatch
import Foundation
import Synchronization

/// One instance of the private-cloud backend: the settings, the credentials, the upstream pool with its prober,
/// the quota store, and the generations running on their threads.
///
/// ```
/// create   ─► settings ─► credentials ─► quota store ─► probe every upstream once ─► start the prober
/// generate ─► validate ─► capability checks ─► charge one request ─► bodies per upstream ─► Thread ─► run
/// cancel   ─► UpstreamGeneration.cancel (closes the upstream request)
/// destroy  ─► cancel all ─► join the generation threads ─► stop the prober ─► close the store
/// ```
///
/// Without `Upstreams` the instance is created but disabled: describe says "private cloud is not configured"
/// (`not_configured`) and generate refuses with `model_unavailable`. With a key and an `http://` upstream on a
/// non-loopback host (and no `AllowInsecureHTTP=yes`) it is created but unavailable (`insecure_upstream`).
final class PrivateCloudInstance: AFMBackend {
    /// The stable backend id (also the manifest id).
    static let id: StaticString = "private-cloud"
    /// The backend's own version, reported at negotiation and in describe.
    static let version: StaticString = "1.0.0"

    /// The parts that exist only when the backend is configured.
    struct Configured: Sendable {
        var credentials: Credentials
        var pool: UpstreamPool
        var quota: QuotaStore
        /// Why the backend refuses to run although configured (a key that would cross the network in clear).
        var refusal: (reason: String, code: String)?
    }

    let settings: Settings
    let configured: Configured?
    let host: HostAPI

    private struct State {
        var running: [UInt64: UpstreamGeneration] = [:]
        var destroyed = false
    }

    private let state = Mutex(State())
    private let threads = DispatchGroup()

    /// Creates an instance from a config document.
    ///
    /// - Throws: `BackendError` for bad settings, an unreadable or too-open `APIKeyFile`, or a quota database that
    ///   cannot be opened.
    init(host: HostAPI, configJSON: Data) throws(BackendError) {
        let settings = try Settings(parsing: configJSON)
        self.settings = settings
        self.host = host
        guard settings.isConfigured else {
            configured = nil
            host.log(AFM_LOG_INFO, "private-cloud instance \(settings.instance): not configured (no Upstreams)")
            return
        }
        let credentials = try Credentials(source: settings.keySource)
        let quota = try QuotaStore(directory: settings.stateDirectory)
        let pool = UpstreamPool(settings: settings, credentials: credentials, host: host)
        // The key goes out as a bearer header on every request and probe: over plain http:// to another machine
        // anyone on the path reads it. Such an upstream needs an explicit AllowInsecureHTTP=yes; until then the
        // backend stays unavailable and sends nothing (not even a probe).
        let cleartext = settings.cleartextUpstreams
        var refusal: (reason: String, code: String)?
        if credentials.hasKey && !settings.allowInsecureHTTP && !cleartext.isEmpty {
            let reason =
                "the API key would be sent in clear to " + cleartext.joined(separator: ", ")
                + " (http:// on a non-loopback host); use https:// or set AllowInsecureHTTP=yes"
            refusal = (reason, "insecure_upstream")
            host.log(AFM_LOG_ERROR, "private-cloud instance \(settings.instance): \(reason)")
        } else {
            pool.probeAll()
            pool.start()
        }
        configured = Configured(credentials: credentials, pool: pool, quota: quota, refusal: refusal)
        let list = settings.upstreams.map { "\($0.baseURL) (\($0.wireProtocol.rawValue), model \($0.model))" }
        let key: String =
            switch settings.keySource {
            case .none: "no API key"
            case .file(let path): "API key from \(path)"
            case .environment(let name): "API key from $\(name)"
            }
        host.log(
            AFM_LOG_INFO,
            "private-cloud instance \(settings.instance): model \(settings.modelID) via "
                + list.joined(separator: ", ") + "; \(key); quota in \(quota.path)")
    }

    // MARK: - Describe

    /// Why the backend cannot serve (describe's `reason` and `reason_code`), or nil when it can.
    private func unavailability() -> BackendDescription.Unavailability? {
        guard let configured else { return .init(reason: "private cloud is not configured", code: "not_configured") }
        if let problem = configured.credentials.problem { return .init(reason: problem.reason, code: problem.code) }
        if let refusal = configured.refusal { return .init(reason: refusal.reason, code: refusal.code) }
        let entries = configured.pool.entries()
        if entries.allSatisfy({ $0.health.healthy == false }) {
            let reasons = entries.map { "\($0.config.baseURL): \($0.health.reason)" }.joined(separator: "; ")
            return .init(reason: "no private-cloud upstream is reachable (\(reasons))", code: "upstream_unreachable")
        }
        return nil
    }

    /// The describe document, with the extension fields `upstreams` and `quota`.
    func describeDocument() -> String {
        let credentials = configured?.credentials
        func redacted(_ text: String) -> String { credentials?.redact(text) ?? text }
        func quote(_ text: String?) -> String { text.map { JSON.quote(redacted($0)) } ?? "null" }
        // structured_output (ABI 1.1): the schema goes upstream (text.format / response_format); the host checks
        // every answer, so an upstream that ignores it fails the response instead of completing it.
        let model = ModelDescription(
            id: settings.modelID, contextTokens: settings.contextTokens,
            maxInputTokens: settings.contextTokens - settings.maxOutputTokens, maxOutputTokens: settings.maxOutputTokens,
            capabilities: ModelCapabilities(
                streaming: true, tools: true, vision: settings.vision, reasoning: settings.reasoning != .no,
                reasoningOptional: settings.reasoning != .yes, structuredOutput: true))
        let upstreams = (configured?.pool.entries() ?? []).map { entry in
            var item = "{\"url\":" + JSON.quote(entry.config.baseURL)
            item += ",\"protocol\":" + JSON.quote(entry.config.wireProtocol.rawValue)
            item += ",\"model\":" + JSON.quote(entry.config.model)
            item += ",\"healthy\":" + (entry.health.healthy.map { "\($0)" } ?? "null")
            item += ",\"reason\":" + quote(entry.health.reason)
            item += ",\"last_probe\":" + quote(entry.health.lastProbe.map { ISO8601DateFormatter().string(from: $0) })
            return item + "}"
        }
        var extra: [(key: String, json: String)] = [("upstreams", "[" + upstreams.joined(separator: ",") + "]")]
        if let configured { extra.append(("quota", quotaDocument(configured))) }
        return BackendDescription(
            backend: Self.id.description, version: Self.version.description,
            unavailability: unavailability().map { .init(reason: redacted($0.reason), code: redacted($0.code)) },
            models: [model], extraMembers: extra
        ).json
    }

    /// describe's `quota`: today's figures per upstream and for the backend (the sums over its upstreams).
    private func quotaDocument(_ configured: Configured) -> String {
        let accounts = configured.pool.upstreams.map(QuotaStore.Account.init)
        let today = configured.quota.snapshot(accounts.map(\.upstream))
        func number(_ value: Int?) -> String { value.map { "\($0)" } ?? "null" }
        func remaining(_ limit: Int?, _ used: Int) -> Int? { limit.map { max(0, $0 - used) } }
        /// A sum over upstreams, nil (unlimited) when any of them is.
        /// Saturating: the limits come from the config file and the counts from the database file.
        func sum(_ values: [Int?]) -> Int? {
            values.contains { $0 == nil } ? nil : values.reduce(0) { QuotaStore.saturatingSum($0, $1 ?? 0) }
        }
        var entries: [String] = []
        var requestsRemaining: [Int?] = []
        var tokensRemaining: [Int?] = []
        var exhausted = true
        for (account, usage) in zip(accounts, today.usage) {
            let requestsLeft = remaining(account.requestLimit, usage.requests)
            let tokensLeft = remaining(account.tokenLimit, usage.tokens)
            let usedUp = account.exhaustion(usage) != nil
            exhausted = exhausted && usedUp
            requestsRemaining.append(requestsLeft)
            tokensRemaining.append(tokensLeft)
            var entry = "{\"url\":" + JSON.quote(account.upstream)
            entry += ",\"requests_remaining\":\(number(requestsLeft)),\"tokens_remaining\":\(number(tokensLeft))"
            entry += ",\"requests_used\":\(usage.requests),\"tokens_used\":\(usage.tokens)"
            entry += ",\"daily_request_quota\":\(number(account.requestLimit))"
            entry += ",\"daily_token_quota\":\(number(account.tokenLimit)),\"exhausted\":\(usedUp)}"
            entries.append(entry)
        }
        var json = "{\"requests_remaining\":\(number(sum(requestsRemaining)))"
        json += ",\"tokens_remaining\":\(number(sum(tokensRemaining)))"
        json += ",\"requests_used\":\(today.total.requests),\"tokens_used\":\(today.total.tokens)"
        json += ",\"daily_request_quota\":\(number(sum(accounts.map(\.requestLimit))))"
        json += ",\"daily_token_quota\":\(number(sum(accounts.map(\.tokenLimit))))"
        json += ",\"exhausted\":\(exhausted && !accounts.isEmpty),\"resets_at\":" + JSON.quote(today.resetsAt)
        return json + ",\"upstreams\":[" + entries.joined(separator: ",") + "]}"
    }

    // MARK: - Generate

    /// Validates a request, charges one request to the quota of the first upstream (healthy first) whose quota is
    /// not used up, and starts its generation on a new thread.
    ///
    /// - Throws (nothing is emitted then): `invalid_request` for a malformed document;
    ///   `model_unavailable` when not configured, without credentials or for another model;
    ///   `unsupported_capability` for images without `Vision=yes` or `reasoning_effort: "none"` with
    ///   `Reasoning=yes`; `quota_exceeded` naming every upstream's used-up limit and the reset time when no
    ///   upstream has quota left today.
    func generate(requestID: UInt64, requestJSON requestBytes: UnsafeBufferPointer<UInt8>, sink: EventSink)
        throws(BackendError)
    {
        // Borrowed for this call only (the ABI's rule); the upstream bodies are built from a copy.
        let requestJSON = Data(buffer: requestBytes)
        let document: [String: Any]
        do {
            document = try JSON.object(from: requestJSON)
        } catch {
            throw .invalidRequest("generation request: \(error.message)")
        }
        let request = try UpstreamRequest(parsing: document, raw: Array(requestJSON))
        guard let configured else { throw .modelUnavailable("private cloud is not configured") }
        guard request.model == settings.modelID else {
            throw .modelUnavailable(
                "model \"\(request.model)\" is not served by the private-cloud backend (model: \"\(settings.modelID)\")")
        }
        if let problem = configured.credentials.problem { throw .modelUnavailable(problem.reason) }
        if let refusal = configured.refusal { throw .modelUnavailable(refusal.reason) }
        if request.hasImages && !settings.vision {
            throw BackendError(
                AFM_ERR_UNSUPPORTED_CAPABILITY,
                "the private-cloud upstream is not configured for images (set Vision=yes if its model accepts them)")
        }
        if request.reasoningEffort == "none" && settings.reasoning == .yes {
            throw BackendError(
                AFM_ERR_UNSUPPORTED_CAPABILITY,
                "the private-cloud model reasons always; reasoning effort \"none\" is not supported")
        }
        let sendsReasoning = settings.reasoning != .no
        let bodies = configured.pool.upstreams.map {
            request.body(for: $0.wireProtocol, model: $0.model, sendsReasoning: sendsReasoning)
        }
        let refusal: BackendError? = state.withLock { state in
            if state.destroyed { return .internal("generate called after destroy") }
            if state.running[requestID] != nil { return .invalidRequest("request_id \(requestID) is already running") }
            return nil
        }
        if let refusal { throw refusal }
        let order = configured.pool.order()
        let charge: QuotaStore.Charge
        switch try configured.quota.reserve(order.map { QuotaStore.Account(configured.pool.upstreams[$0]) }) {
        case .charged(let charged):
            charge = charged
        case .usedUp(let reasons):
            throw BackendError(
                AFM_ERR_QUOTA_EXCEEDED, QuotaStore.exceededMessage(reasons, resetsAt: QuotaStore.resetTime(Date())))
        }
        let generation = UpstreamGeneration(
            requestID: requestID, responseID: request.responseID, sink: sink, bodies: bodies,
            toolNames: request.toolNames, order: order, charge: charge,
            context: .init(
                pool: configured.pool, credentials: configured.credentials, quota: configured.quota, host: host,
                connectTimeoutMilliseconds: settings.connectTimeoutSeconds * 1000,
                readTimeoutSeconds: settings.readTimeoutSeconds, maxStreamBytes: settings.maxStreamBytes,
                maxEventBytes: settings.maxEventBytes))
        state.withLock { $0.running[requestID] = generation }
        threads.enter()
        let thread = Thread { [self] in
            generation.run()
            _ = state.withLock { $0.running.removeValue(forKey: requestID) }
            threads.leave()
        }
        thread.name = "afm-private-cloud-\(requestID)"
        thread.start()
    }

    // MARK: - Cancel and destroy

    /// Stops the generation, if it is running, and closes its upstream request. Non-blocking and idempotent.
    func cancel(requestID: UInt64) {
        state.withLock { $0.running[requestID] }?.cancel()
    }

    /// Cancels what still runs (a well-behaved host leaves nothing), joins every thread, stops the prober and
    /// closes the quota store.
    func destroy() {
        let leftovers = state.withLock { state in
            state.destroyed = true
            return Array(state.running.values)
        }
        if !leftovers.isEmpty {
            host.log(AFM_LOG_WARNING, "destroy with \(leftovers.count) generation(s) still running; cancelling them")
        }
        for generation in leftovers { generation.cancel() }
        threads.wait()
        configured?.pool.stop()
        configured?.quota.close()
    }
}
