// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Dispatch
import Foundation
import Synchronization

/// The configured upstreams, their health, and the prober thread that keeps it current.
///
/// ```
/// create ─► probeAll() (once, synchronously) ─► start() ─► prober thread:
///     loop { probe every upstream whose time has come (GET <base>/models); sleep until the next one or a wakeup }
/// request ─► order() (healthy first, config order) ─► a failure before the first token ─► markFailure ─► next
/// destroy ─► stop() (cancels an in-flight probe, wakes and joins the prober)
/// ```
///
/// Backoff: a healthy upstream is probed every `ProbeIntervalSeconds`; after a failure the next probe comes after
/// 1 s, then 2, 4, 8 … seconds, never more than the interval, so a restarted upstream is noticed quickly without
/// hammering one that stays down.
final class UpstreamPool: Sendable {
    /// One upstream's health as last observed.
    struct Health: Sendable {
        /// nil before the first probe.
        var healthy: Bool?
        /// For humans: "reachable (HTTP 200)", "connection failed: …".
        var reason: String
        var lastProbe: Date?
        var consecutiveFailures = 0
        var nextProbe = Date.distantPast
    }

    /// One upstream with its health, for describe.
    struct Entry: Sendable {
        var config: Settings.UpstreamConfig
        var health: Health
    }

    private struct State {
        var health: [Health]
        var stopped = false
        var probe: HTTPTransfer?
    }

    let upstreams: [Settings.UpstreamConfig]
    private let credentials: Credentials
    private let interval: TimeInterval
    private let connectTimeoutMilliseconds: Int
    private let state: Mutex<State>
    private let wakeup = DispatchSemaphore(value: 0)
    private let finished = DispatchGroup()
    private let host: HostAPI

    init(settings: Settings, credentials: Credentials, host: HostAPI) {
        upstreams = settings.upstreams
        self.credentials = credentials
        self.host = host
        interval = TimeInterval(settings.probeIntervalSeconds)
        connectTimeoutMilliseconds = settings.connectTimeoutSeconds * 1000
        state = Mutex(State(health: settings.upstreams.map { _ in Health(reason: "not probed yet") }))
    }

    // MARK: - Health

    /// Upstream indices to try for a request: healthy ones first, then the others (they may have recovered),
    /// each group in configuration order.
    func order() -> [Int] {
        state.withLock { state in
            let healthy = state.health.indices.filter { state.health[$0].healthy != false }
            let unhealthy = state.health.indices.filter { state.health[$0].healthy == false }
            return healthy + unhealthy
        }
    }

    /// Every upstream with its health.
    func entries() -> [Entry] {
        state.withLock { state in zip(upstreams, state.health).map { Entry(config: $0, health: $1) } }
    }

    /// Records a failure seen by a probe or a request, and schedules the next probe by the backoff.
    func markFailure(_ index: Int, reason: String, now: Date = Date()) {
        let reason = credentials.redact(reason)
        let wasHealthy: Bool? = state.withLock { state in
            var health = state.health[index]
            let before = health.healthy
            health.healthy = false
            health.reason = reason
            health.lastProbe = now
            health.consecutiveFailures += 1
            let backoff = min(interval, pow(2, Double(min(health.consecutiveFailures - 1, 20))))
            health.nextProbe = now.addingTimeInterval(backoff)
            state.health[index] = health
            return before
        }
        if wasHealthy != false {
            host.log(AFM_LOG_WARNING, "upstream \(upstreams[index].baseURL) is unavailable: \(reason)")
        }
        wakeup.signal()
    }

    /// Records a success.
    func markSuccess(_ index: Int, reason: String, now: Date = Date()) {
        let reason = credentials.redact(reason)
        let wasHealthy: Bool? = state.withLock { state in
            var health = state.health[index]
            let before = health.healthy
            health.healthy = true
            health.reason = reason
            health.lastProbe = now
            health.consecutiveFailures = 0
            health.nextProbe = now.addingTimeInterval(interval)
            state.health[index] = health
            return before
        }
        if wasHealthy != true {
            host.log(AFM_LOG_INFO, "upstream \(upstreams[index].baseURL) is available: \(reason)")
        }
    }

    // MARK: - Probing

    /// Probes every upstream once, now, on the calling thread (used by `create`).
    func probeAll() {
        for index in upstreams.indices { probe(index) }
    }

    /// Starts the prober thread.
    func start() {
        finished.enter()
        let thread = Thread { [self] in
            run()
            finished.leave()
        }
        thread.name = "afm-private-cloud-probe"
        thread.start()
    }

    /// Stops and joins the prober thread. Idempotent.
    func stop() {
        let probe = state.withLock { state in
            state.stopped = true
            return state.probe
        }
        probe?.cancel()
        wakeup.signal()
        finished.wait()
    }

    private func run() {
        while true {
            let (stopped, due, next) = state.withLock { state -> (Bool, [Int], Date) in
                let now = Date()
                let due = state.health.indices.filter { state.health[$0].nextProbe <= now }
                let next = state.health.map(\.nextProbe).min() ?? now.addingTimeInterval(interval)
                return (state.stopped, due, next)
            }
            if stopped { return }
            for index in due {
                if state.withLock({ $0.stopped }) { return }
                probe(index)
            }
            if !due.isEmpty { continue }
            let wait = max(0.05, min(next.timeIntervalSinceNow, interval))
            _ = wakeup.wait(timeout: .now() + .milliseconds(Int(wait * 1000)))
        }
    }

    /// `GET <base>/models` with the credentials; 2xx is healthy.
    private func probe(_ index: Int) {
        let upstream = upstreams[index]
        let transfer = HTTPTransfer()
        let registered = state.withLock { state -> Bool in
            guard !state.stopped else { return false }
            state.probe = transfer
            return true
        }
        guard registered else { return }
        defer { state.withLock { $0.probe = nil } }
        var headers = ["Accept: application/json"]
        if let authorization = credentials.authorizationHeader { headers.append(authorization) }
        let started = Date()
        var body: [UInt8] = []
        let outcome = transfer.run(
            HTTPTransfer.Request(
                url: upstream.baseURL + "/models", headers: headers, body: nil,
                connectTimeoutMilliseconds: connectTimeoutMilliseconds, idleTimeoutSeconds: 0,
                totalTimeoutMilliseconds: connectTimeoutMilliseconds + 5000)
        ) { _, bytes in
            if body.count < 4096 { body += bytes.prefix(4096 - body.count) }
            return true
        }
        let milliseconds = Int(Date().timeIntervalSince(started) * 1000)
        switch outcome {
        case .completed(let status) where (200..<300).contains(status):
            markSuccess(index, reason: "reachable (GET /models: HTTP \(status) in \(milliseconds) ms)")
        case .completed(let status), .stopped(let status):
            let detail = UpstreamError.message(fromBody: body, redacting: credentials).map { ": \($0)" } ?? ""
            markFailure(index, reason: "GET /models answered HTTP \(status)\(UpstreamError.hint(status))\(detail)")
        case .failed(let message, let timedOut, _):
            markFailure(index, reason: timedOut ? "no answer within the timeout (\(message))" : "connection failed: \(message)")
        case .cancelled:
            return
        }
    }
}
