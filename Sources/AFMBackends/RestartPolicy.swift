// SPDX-License-Identifier: Apache-2.0

/// How the registry restarts a backend whose runner crashed.
///
/// The delay doubles with each crash in a row, from `initialDelay` up to `maximumDelay`. A generation that ran
/// for `stableAfter` without crashing resets the streak. `crashLoopThreshold` crashes within `window` put the
/// backend in state `crash_loop` (it keeps being restarted, at most once per `maximumDelay`).
public struct RestartPolicy: Sendable, Hashable {
    public var initialDelay: Duration
    public var maximumDelay: Duration
    public var stableAfter: Duration
    public var window: Duration
    public var crashLoopThreshold: Int

    public init(
        initialDelay: Duration = .seconds(1), maximumDelay: Duration = .seconds(60), stableAfter: Duration = .seconds(60),
        window: Duration = .seconds(300), crashLoopThreshold: Int = 5
    ) {
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.stableAfter = stableAfter
        self.window = window
        self.crashLoopThreshold = crashLoopThreshold
    }

    /// The delay before restart attempt number `streak` (1-based).
    func delay(forStreak streak: Int) -> Duration {
        var delay = initialDelay
        for _ in 1..<max(1, streak) {
            delay *= 2
            if delay >= maximumDelay { return maximumDelay }
        }
        return min(delay, maximumDelay)
    }
}
