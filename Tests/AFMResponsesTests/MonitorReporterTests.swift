// SPDX-License-Identifier: Apache-2.0
@testable import AFMResponses
import Testing

/// A running request's counts reach the token monitor when they change, at most every `MonitorReporter.interval`.
@Suite struct MonitorReporterTests {
    @Test func changesAreReportedAtMostTenTimesASecond() async throws {
        let monitor = TokenMonitor()
        monitor.begin(id: "resp_1", model: "m", backend: "b", inputTokens: 5)
        var reporter = MonitorReporter(counts: .init(input: 5, output: 0, reasoning: 0, cached: 0))
        reporter.report(.init(input: 5, output: 1, reasoning: 0, cached: 0), id: "resp_1", to: monitor)
        #expect(monitor.totals.outputTokens == 0, "a change within the interval waits")
        try await Task.sleep(for: MonitorReporter.interval + .milliseconds(20))
        reporter.report(.init(input: 5, output: 2, reasoning: 0, cached: 0), id: "resp_1", to: monitor)
        #expect(monitor.totals.outputTokens == 2, "the next change after the interval is reported")
        reporter.report(.init(input: 5, output: 3, reasoning: 0, cached: 0), id: "resp_1", to: monitor)
        #expect(monitor.totals.outputTokens == 2)
        // The final counts always arrive with finish.
        monitor.finish(id: "resp_1", outcome: "completed", counts: .init(input: 5, output: 4, reasoning: 0, cached: 0))
        #expect(monitor.totals.outputTokens == 4)
        #expect(monitor.totals.requests == 1)
    }
}
