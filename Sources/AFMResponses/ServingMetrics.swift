// SPDX-License-Identifier: Apache-2.0
import AFMLogging
import Foundation
import Synchronization

/// What every finished API request adds to the counters, and the Prometheus text (format 0.0.4) of `GET /metrics`.
///
/// Families (docs/operations.md has the mapping to vLLM's and llama-server's names):
/// - histograms, labels `model`, `backend`, vLLM's buckets: `afm_time_to_first_token_seconds`,
///   `afm_time_per_output_token_seconds`, `afm_e2e_request_latency_seconds`, `afm_request_queue_seconds`;
/// - counters `afm_prompt_tokens_total`, `afm_generation_tokens_total`, `afm_cached_tokens_total` (`model`,
///   `backend`), `afm_request_success_total{model,backend,finished_reason}`, `afm_requests_total{dialect,code}`
///   (every answered API request, refusals included), `afm_api_key_requests_total{key}` (by key name);
/// - gauges from the caller at scrape time (``render(gauges:)``): running and waiting requests, backend state.
///
/// One `Mutex` around dictionaries keyed by label values; a request takes it once when it ends, a scrape once.
public final class ServingMetrics: Sendable {
    /// One finished request, as the pipeline saw it.
    public struct Finished: Sendable {
        public var model: String
        public var backend: String
        public var dialect: String
        public var keyName: String?
        /// The HTTP status the client got (200 for a stream that started; 499 when the client left).
        public var status: Int
        /// `stop`, `length`, `abort`, `error` or another incomplete reason.
        public var finishedReason: String
        public var promptTokens: Int
        public var generationTokens: Int
        public var cachedTokens: Int
        /// Seconds from arrival to the first output, nil when there was none.
        public var timeToFirstToken: Double?
        /// Seconds from arrival to the end.
        public var duration: Double
        /// Seconds spent waiting for an admission slot.
        public var queueSeconds: Double

        public init(
            model: String, backend: String, dialect: String, keyName: String?, status: Int, finishedReason: String, promptTokens: Int,
            generationTokens: Int, cachedTokens: Int, timeToFirstToken: Double?, duration: Double, queueSeconds: Double
        ) {
            self.model = model
            self.backend = backend
            self.dialect = dialect
            self.keyName = keyName
            self.status = status
            self.finishedReason = finishedReason
            self.promptTokens = promptTokens
            self.generationTokens = generationTokens
            self.cachedTokens = cachedTokens
            self.timeToFirstToken = timeToFirstToken
            self.duration = duration
            self.queueSeconds = queueSeconds
        }
    }

    /// A gauge family computed at scrape time: name, help, label names, and one sample per label-value tuple.
    public struct Gauge: Sendable {
        public var name: String
        public var help: String
        public var type: String
        public var samples: [(labels: [(String, String)], value: Double)]

        public init(name: String, help: String, type: String = "gauge", samples: [(labels: [(String, String)], value: Double)]) {
            self.name = name
            self.help = help
            self.type = type
            self.samples = samples
        }
    }

    // vLLM's buckets (vllm/v1/metrics/loggers.py), so dashboards built for vLLM read AFM the same way.
    static let firstTokenBuckets: [Double] = [
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
    ]
    static let perTokenBuckets: [Double] = [
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80,
    ]
    static let latencyBuckets: [Double] = [
        0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920, 7680,
    ]

    struct Histogram {
        var counts: [UInt64]
        var sum = 0.0
        var count: UInt64 = 0

        init(bucketCount: Int) { counts = Array(repeating: 0, count: bucketCount) }

        mutating func observe(_ value: Double, buckets: [Double]) {
            // Non-cumulative per bucket here; cumulated when rendered.
            if let index = buckets.firstIndex(where: { value <= $0 }) { counts[index] += 1 }
            sum += value
            count += 1
        }
    }

    struct ModelKey: Hashable, Comparable {
        var model: String
        var backend: String
        static func < (a: ModelKey, b: ModelKey) -> Bool { (a.model, a.backend) < (b.model, b.backend) }
    }

    struct PerModel {
        var firstToken = Histogram(bucketCount: ServingMetrics.firstTokenBuckets.count)
        var perToken = Histogram(bucketCount: ServingMetrics.perTokenBuckets.count)
        var latency = Histogram(bucketCount: ServingMetrics.latencyBuckets.count)
        var queue = Histogram(bucketCount: ServingMetrics.latencyBuckets.count)
        var promptTokens: UInt64 = 0
        var generationTokens: UInt64 = 0
        var cachedTokens: UInt64 = 0
        var finished: [String: UInt64] = [:]

        mutating func add(_ request: Finished) {
            if let first = request.timeToFirstToken {
                firstToken.observe(first, buckets: ServingMetrics.firstTokenBuckets)
                if request.generationTokens > 1 {
                    let perTokenSeconds = max(0, request.duration - first) / Double(request.generationTokens - 1)
                    perToken.observe(perTokenSeconds, buckets: ServingMetrics.perTokenBuckets)
                }
            }
            latency.observe(request.duration, buckets: ServingMetrics.latencyBuckets)
            queue.observe(request.queueSeconds, buckets: ServingMetrics.latencyBuckets)
            promptTokens += UInt64(max(0, request.promptTokens))
            generationTokens += UInt64(max(0, request.generationTokens))
            cachedTokens += UInt64(max(0, request.cachedTokens))
            finished[request.finishedReason, default: 0] += 1
        }
    }

    struct State {
        var models: [ModelKey: PerModel] = [:]
        var requests: [RequestKey: UInt64] = [:]
        var keys: [String: UInt64] = [:]
    }

    struct RequestKey: Hashable, Comparable {
        var dialect: String
        var code: Int
        static func < (a: RequestKey, b: RequestKey) -> Bool { (a.dialect, a.code) < (b.dialect, b.code) }
    }

    private let state = Mutex(State())
    /// The access log (`[Server] AccessLog`), or nil when off.
    private let accessLog = Mutex<Logger?>(nil)

    public init() {}

    /// Turns the access log on (a logger) or off (nil).
    public func setAccessLog(_ logger: Logger?) { accessLog.withLock { $0 = logger } }

    /// Books a request the pipeline ran (its generation started).
    public func record(_ finished: Finished) {
        let key = ModelKey(model: finished.model, backend: finished.backend)
        state.withLock { state in
            // Updated in place: a copy of the entry taken out and stored back shares its histograms' arrays with
            // the dictionary, so every observation copied them (four arrays and a dictionary per request).
            state.models[key, default: PerModel()].add(finished)
            state.requests[RequestKey(dialect: finished.dialect, code: finished.status), default: 0] += 1
            if let name = finished.keyName { state.keys[name, default: 0] += 1 }
        }
        logAccess(
            key: finished.keyName, dialect: finished.dialect, model: finished.model, status: finished.status,
            outcome: finished.finishedReason, prompt: finished.promptTokens, generation: finished.generationTokens,
            firstToken: finished.timeToFirstToken, duration: finished.duration, queue: finished.queueSeconds)
    }

    /// Books a request answered without a generation (a refusal: 401, 400, 404, 503 busy…, or a small endpoint).
    ///
    /// - Parameters:
    ///   - dialect: the API of the path (`responses`), or nil for a path of no dialect (not counted in
    ///     `afm_requests_total`, still in the access log).
    public func recordAnswered(path: String, dialect: String?, keyName: String?, model: String?, status: Int, duration: Double) {
        state.withLock { state in
            if let dialect { state.requests[RequestKey(dialect: dialect, code: status), default: 0] += 1 }
            if let keyName { state.keys[keyName, default: 0] += 1 }
        }
        logAccess(
            key: keyName, dialect: dialect ?? path, model: model, status: status, outcome: nil, prompt: nil, generation: nil,
            firstToken: nil, duration: duration, queue: nil)
    }

    private func logAccess(
        key: String?, dialect: String, model: String?, status: Int, outcome: String?, prompt: Int?, generation: Int?,
        firstToken: Double?, duration: Double, queue: Double?
    ) {
        guard let logger = accessLog.withLock({ $0 }) else { return }
        // One fixed set of fields, "-" where a value does not apply, so the lines parse with one pattern.
        logger.info(
            "request",
            [
                "key": key ?? "-", "dialect": dialect, "model": model ?? "-", "status": String(status), "finish": outcome ?? "-",
                "prompt_tokens": prompt.map(String.init) ?? "-", "generation_tokens": generation.map(String.init) ?? "-",
                "ttft_ms": firstToken.map { Self.milliseconds($0) } ?? "-", "duration_ms": Self.milliseconds(duration),
                "queue_ms": queue.map { Self.milliseconds($0) } ?? "-",
            ])
    }

    private static func milliseconds(_ seconds: Double) -> String { String(format: "%.1f", seconds * 1000) }

    // MARK: - Exposition

    /// The `Content-Type` of ``render(gauges:)``.
    public static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// The whole exposition: the counters and histograms kept here, then `gauges` (computed by the caller now).
    public func render(gauges: [Gauge]) -> [UInt8] {
        let snapshot = state.withLock { $0 }
        var out = PrometheusText()
        let models = snapshot.models.sorted { $0.key < $1.key }
        func histogram(_ name: String, _ help: String, _ buckets: [Double], _ pick: (PerModel) -> Histogram) {
            out.family(name, help: help, type: "histogram")
            for (key, entry) in models {
                let labels = [("model", key.model), ("backend", key.backend)]
                let value = pick(entry)
                var cumulative: UInt64 = 0
                for (index, bound) in buckets.enumerated() {
                    cumulative += value.counts[index]
                    out.sample(name + "_bucket", labels + [("le", PrometheusText.number(bound))], Double(cumulative))
                }
                out.sample(name + "_bucket", labels + [("le", "+Inf")], Double(value.count))
                out.sample(name + "_sum", labels, value.sum)
                out.sample(name + "_count", labels, Double(value.count))
            }
        }
        histogram(
            "afm_time_to_first_token_seconds", "Seconds from a request's arrival to its first output token.", Self.firstTokenBuckets,
            \.firstToken)
        histogram(
            "afm_time_per_output_token_seconds", "Seconds per output token after the first.", Self.perTokenBuckets, \.perToken)
        histogram(
            "afm_e2e_request_latency_seconds", "Seconds from a request's arrival to its end.", Self.latencyBuckets, \.latency)
        histogram(
            "afm_request_queue_seconds", "Seconds a request waited for an admission slot (MaxConcurrent).", Self.latencyBuckets,
            \.queue)
        func counter(_ name: String, _ help: String, _ pick: (PerModel) -> UInt64) {
            out.family(name, help: help, type: "counter")
            for (key, entry) in models {
                out.sample(name, [("model", key.model), ("backend", key.backend)], Double(pick(entry)))
            }
        }
        counter("afm_prompt_tokens_total", "Prompt (input) tokens of finished requests.", \.promptTokens)
        counter("afm_generation_tokens_total", "Generated (output) tokens of finished requests.", \.generationTokens)
        counter("afm_cached_tokens_total", "Prompt tokens served from a backend's prompt cache.", \.cachedTokens)
        out.family("afm_request_success_total", help: "Finished generations by how they ended.", type: "counter")
        for (key, entry) in models {
            for (reason, count) in entry.finished.sorted(by: { $0.key < $1.key }) {
                out.sample(
                    "afm_request_success_total", [("model", key.model), ("backend", key.backend), ("finished_reason", reason)],
                    Double(count))
            }
        }
        out.family("afm_requests_total", help: "API requests answered, by dialect and HTTP status.", type: "counter")
        for (key, count) in snapshot.requests.sorted(by: { $0.key < $1.key }) {
            out.sample("afm_requests_total", [("dialect", key.dialect), ("code", String(key.code))], Double(count))
        }
        out.family("afm_api_key_requests_total", help: "API requests by the name of the key that authenticated them.", type: "counter")
        for (name, count) in snapshot.keys.sorted(by: { $0.key < $1.key }) {
            out.sample("afm_api_key_requests_total", [("key", name)], Double(count))
        }
        for gauge in gauges {
            out.family(gauge.name, help: gauge.help, type: gauge.type)
            for sample in gauge.samples { out.sample(gauge.name, sample.labels, sample.value) }
        }
        return out.bytes
    }
}

/// Writes the Prometheus text format 0.0.4: `# HELP`, `# TYPE`, samples with escaped label values, `\n` endings.
struct PrometheusText {
    private(set) var bytes: [UInt8] = []

    init() { bytes.reserveCapacity(16 * 1024) }

    mutating func family(_ name: String, help: String, type: String) {
        append("# HELP \(name) \(Self.escapeHelp(help))\n# TYPE \(name) \(type)\n")
    }

    mutating func sample(_ name: String, _ labels: [(String, String)], _ value: Double) {
        append(name)
        if !labels.isEmpty {
            append("{")
            for (index, (label, text)) in labels.enumerated() {
                if index > 0 { append(",") }
                append(label)
                append("=\"")
                append(Self.escapeLabel(text))
                append("\"")
            }
            append("}")
        }
        append(" ")
        append(Self.number(value))
        append("\n")
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    /// Whole numbers without a fraction, others in Swift's shortest round-trip form (which Go's parser reads).
    static func number(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return "\(value)"
    }

    /// Label values escape `\`, `"` and line feeds.
    static func escapeLabel(_ text: String) -> String {
        guard text.contains(where: { $0 == "\\" || $0 == "\"" || $0 == "\n" }) else { return text }
        var result = ""
        for character in text {
            switch character {
            case "\\": result += "\\\\"
            case "\"": result += "\\\""
            case "\n": result += "\\n"
            default: result.append(character)
            }
        }
        return result
    }

    /// Help text escapes `\` and line feeds.
    static func escapeHelp(_ text: String) -> String {
        text.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\n", with: "\\n")
    }
}
