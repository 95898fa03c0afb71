// SPDX-License-Identifier: Apache-2.0

/// Passes one running request's changing token counts to the `TokenMonitor`, at most every `interval`.
///
/// The monitor's lock is shared by every request, and a request changes its counts with nearly every event. Live
/// views (`afmctl top`) redraw a few times a second, so a running request reports a change only when `interval`
/// has passed since its last report; `TokenMonitor.finish` carries the final counts, so a short request reports
/// nothing in between (its counts reached the monitor twice instead of once per text delta, which showed as lock
/// contention between event loops in the benchmark's profile).
struct MonitorReporter {
    /// Ten reports a second at most.
    static let interval: Duration = .milliseconds(100)

    private var reported: ResponseBuilder.UsageCounts
    private var reportedAt = ContinuousClock.now

    init(counts: ResponseBuilder.UsageCounts) {
        reported = counts
    }

    mutating func report(_ counts: ResponseBuilder.UsageCounts, id: String, to monitor: TokenMonitor) {
        guard counts != reported else { return }
        let now = ContinuousClock.now
        guard now - reportedAt >= Self.interval else { return }
        monitor.update(id: id, counts: counts)
        reported = counts
        reportedAt = now
    }
}
