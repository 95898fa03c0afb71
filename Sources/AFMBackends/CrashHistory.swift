// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

/// The crashes of one backend's runners, for restart backoff and for status output.
struct CrashHistory: Sendable {
    /// The most recent crash.
    struct Crash: Sendable {
        var exit: RunnerExit
        var at: Date
    }

    /// When recent crashes happened (pruned to the policy's window).
    private(set) var recent: [ContinuousClock.Instant] = []
    private(set) var last: Crash?
    /// Every crash since the daemon started.
    private(set) var total = 0
    /// Successful restarts after crashes.
    private(set) var restarts = 0
    /// Crashes (and failed restarts) in a row; sets the backoff.
    private(set) var streak = 0
    /// When the pending restart is due, if one is pending.
    private(set) var restartDue: ContinuousClock.Instant?

    mutating func record(exit: RunnerExit, at now: ContinuousClock.Instant, stableFor: Duration, policy: RestartPolicy) {
        if stableFor >= policy.stableAfter { streak = 0 }
        total += 1
        last = Crash(exit: exit, at: Date())
        recent.append(now)
        recent.removeAll { now - $0 > policy.window }
    }

    /// Counts one more attempt in the streak and returns the delay before it.
    mutating func scheduleRestart(now: ContinuousClock.Instant, policy: RestartPolicy) -> Duration {
        streak += 1
        let delay = policy.delay(forStreak: streak)
        restartDue = now + delay
        return delay
    }

    mutating func restarted() {
        restarts += 1
        restartDue = nil
    }

    func recentCount(now: ContinuousClock.Instant, policy: RestartPolicy) -> Int {
        recent.filter { now - $0 <= policy.window }.count
    }

    /// Whole seconds until the pending restart (0 when none is pending or it is due).
    func secondsUntilRestart() -> Int {
        guard let restartDue else { return 0 }
        let left = restartDue - .now
        return left <= .zero ? 0 : Int(left.components.seconds) + 1
    }

    /// `{"signal":11,"exit_status":null,"status":"signal 11 (SIGSEGV)","at":"…","restarts":N,…}`, or null.
    var json: JSONValue {
        guard let last else { return .null }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var object: JSONObject = [
            "signal": last.exit.status?.signal.map { .number(JSONNumber(Int($0))) } ?? .null,
            "exit_status": last.exit.status?.exitCode.map { .number(JSONNumber(Int($0))) } ?? .null,
            "status": .string(last.exit.summary),
            "at": .string(formatter.string(from: last.at)),
            "at_unix_ms": .number(JSONNumber(Int(last.at.timeIntervalSince1970 * 1000))),
            "crashes": .number(JSONNumber(total)),
            "restarts": .number(JSONNumber(restarts)),
        ]
        object["killed_by_host"] = last.exit.killReason.map(JSONValue.string) ?? .null
        return .object(object)
    }
}
