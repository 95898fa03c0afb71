// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON
import Foundation
import Synchronization

/// Live token counters since the daemon started: per request and in total, with what remains of the backends'
/// daily quotas.
///
/// A request is counted from the moment its generation started; requests refused before that (validation,
/// unknown model, budget) are never counted. Failed and cancelled generations keep the usage their backend
/// reported. The figures live as long as the process: stopping the listener keeps them, a restart resets them.
/// The quotas are not counted here: they are the `quota` objects of the backends' describe documents (the
/// private cloud's, persisted by the backend), as the registry last refreshed them.
public final class TokenMonitor: Sendable {
    /// The counters of one request.
    public struct Request: Sendable, Hashable {
        public var id: String
        public var model: String
        public var backend: String
        /// The name of the API key that sent it, or nil without keys.
        public var key: String?
        /// The API dialect the request came in.
        public var dialect: APIDialect
        /// `running`, `completed`, `incomplete`, `failed` or `cancelled`.
        public var state: String
        public var inputTokens: Int
        public var outputTokens: Int
        public var reasoningTokens: Int
        public var cachedTokens: Int
        /// The monitor's `version` at this request's last change: orders requests by their latest update.
        public var updatedVersion: UInt64
    }

    /// Totals over every counted request.
    public struct Totals: Sendable, Hashable {
        public var requests = 0
        public var inputTokens = 0
        public var outputTokens = 0
        public var reasoningTokens = 0
        public var cachedTokens = 0
        /// Requests per API dialect.
        public var requestsByDialect: [APIDialect: Int] = [:]

        mutating func add(_ request: Request) {
            requests += 1
            inputTokens += request.inputTokens
            outputTokens += request.outputTokens
            reasoningTokens += request.reasoningTokens
            cachedTokens += request.cachedTokens
            requestsByDialect[request.dialect, default: 0] += 1
        }
    }

    private struct State {
        var finished = Totals()
        var running: [String: Request] = [:]
        /// The last `recentLimit` finished requests, a ring: `recentNext` is where the next one goes (the oldest
        /// once the ring is full). A ring, because shifting a full array on every finished request showed up in
        /// the daemon's profile.
        var recentRing: [Request] = []
        var recentNext = 0

        /// Finished requests, oldest first.
        var recent: [Request] {
            recentRing.count < TokenMonitor.recentLimit
                ? recentRing : Array(recentRing[recentNext...] + recentRing[..<recentNext])
        }

        mutating func remember(_ request: Request) {
            if recentRing.count < TokenMonitor.recentLimit {
                recentRing.append(request)
            } else {
                recentRing[recentNext] = request
                recentNext = (recentNext + 1) % TokenMonitor.recentLimit
            }
        }
        var lastUpdated: String?
        var version: UInt64 = 0
    }

    /// How many finished requests are kept for display.
    public static let recentLimit = 50
    public let startedAt = Date()
    private let state = Mutex(State())
    private let quotas: @Sendable () -> JSONValue
    private let promptCaches: @Sendable () -> JSONValue

    /// - Parameters:
    ///   - quotas: the backends' quotas for each snapshot, as an array (see `quotas(_:)`).
    ///   - promptCaches: the backends' prompt caches for each snapshot, as an array (see `promptCaches(_:)`).
    public init(
        quotas: @escaping @Sendable () -> JSONValue = { .array([]) },
        promptCaches: @escaping @Sendable () -> JSONValue = { .array([]) }
    ) {
        self.quotas = quotas
        self.promptCaches = promptCaches
    }

    /// The `prompt_cache` object of every backend whose describe document has one (the local backend's saved
    /// sequence states: bytes, entries, hits, misses, evictions per tier), each with the backend's id first.
    public static func promptCaches(_ statuses: [BackendStatus]) -> JSONValue {
        .array(
            statuses.compactMap { status -> JSONValue? in
                guard let cache = status.details["prompt_cache"]?.objectValue else { return nil }
                var entry: JSONObject = ["backend": .string(status.id)]
                for (key, value) in cache where key != "backend" { entry[key] = value }
                return .object(entry)
            })
    }

    /// The `quota` object of every backend whose describe document has one, each with the backend's id first:
    /// `[{"backend":"private-cloud","requests_remaining":…,"tokens_remaining":…,"resets_at":…,"upstreams":[…]}]`.
    public static func quotas(_ statuses: [BackendStatus]) -> JSONValue {
        .array(
            statuses.compactMap { status -> JSONValue? in
                guard let quota = status.details["quota"]?.objectValue else { return nil }
                var entry: JSONObject = ["backend": .string(status.id)]
                for (key, value) in quota where key != "backend" { entry[key] = value }
                return .object(entry)
            })
    }

    func begin(id: String, model: String, backend: String, dialect: APIDialect = .responses, inputTokens: Int, key: String? = nil) {
        state.withLock { state in
            state.running[id] = Request(
                id: id, model: model, backend: backend, key: key, dialect: dialect, state: "running", inputTokens: inputTokens, outputTokens: 0,
                reasoningTokens: 0, cachedTokens: 0, updatedVersion: state.version + 1)
            state.lastUpdated = id
            state.version += 1
        }
    }

    func update(id: String, counts: ResponseBuilder.UsageCounts) {
        state.withLock { state in
            guard state.running[id] != nil else { return }
            state.version += 1
            state.running[id]?.apply(counts, version: state.version)
            state.lastUpdated = id
        }
    }

    /// Ends a request's entry; returns its backend (nil when it was not running).
    @discardableResult
    func finish(id: String, outcome: String, counts: ResponseBuilder.UsageCounts) -> String? {
        state.withLock { state -> String? in
            guard var request = state.running.removeValue(forKey: id) else { return nil }
            request.apply(counts, version: state.version + 1)
            request.state = outcome
            state.finished.add(request)
            state.remember(request)
            state.lastUpdated = id
            state.version += 1
            return request.backend
        }
    }

    /// A counter that changes whenever any figure changes (for watchers that only send changes).
    public var version: UInt64 { state.withLock { $0.version } }

    /// Totals including the requests still running.
    public var totals: Totals {
        state.withLock { state in
            var totals = state.finished
            for request in state.running.values { totals.add(request) }
            return totals
        }
    }

    /// The snapshot `WatchCounters` shows (`/status` shows its `totals`).
    public var json: JSONValue {
        let (totals, running, recent, last) = state.withLock { state in
            (state.finished, Array(state.running.values), state.recent, state.lastUpdated)
        }
        var all = totals
        for request in running { all.add(request) }
        var byDialect = JSONObject()
        for dialect in APIDialect.allCases { byDialect[dialect.rawValue] = .number(JSONNumber(all.requestsByDialect[dialect] ?? 0)) }
        let lastRequest = running.first { $0.id == last } ?? recent.last { $0.id == last }
        return [
            "since": .string(ISO8601DateFormatter().string(from: startedAt)),
            "totals": [
                "requests": .number(JSONNumber(all.requests)), "input_tokens": .number(JSONNumber(all.inputTokens)),
                "output_tokens": .number(JSONNumber(all.outputTokens)), "reasoning_tokens": .number(JSONNumber(all.reasoningTokens)),
                "cached_tokens": .number(JSONNumber(all.cachedTokens)), "requests_by_dialect": .object(byDialect),
            ],
            "running": .number(JSONNumber(running.count)),
            "last_updated": lastRequest.map(\.json) ?? nil,
            "requests": .array((recent + running.sorted { $0.updatedVersion < $1.updatedVersion }).suffix(20).map(\.json)),
            "quota": quotas(),
            "prompt_cache": promptCaches(),
        ]
    }
}

extension TokenMonitor.Request {
    mutating func apply(_ counts: ResponseBuilder.UsageCounts, version: UInt64) {
        inputTokens = counts.input
        outputTokens = counts.output
        reasoningTokens = counts.reasoning
        cachedTokens = counts.cached
        updatedVersion = version
    }

    var json: JSONValue {
        [
            "id": .string(id), "model": .string(model), "backend": .string(backend), "key": key.map(JSONValue.string) ?? nil,
            "dialect": .string(dialect.rawValue), "state": .string(state),
            "input_tokens": .number(JSONNumber(inputTokens)), "output_tokens": .number(JSONNumber(outputTokens)),
            "reasoning_tokens": .number(JSONNumber(reasoningTokens)), "cached_tokens": .number(JSONNumber(cachedTokens)),
        ]
    }
}
