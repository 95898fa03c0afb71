// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Testing

@Suite struct SignalTests {
    /// `afm` started from a thread that blocks SIGTERM (as a test runner's dispatch workers do) drops that mask at
    /// start, so SIGTERM ends it at once even while it waits for an answer that never comes.
    @Test func afmStartedWithSignalsBlockedStillEndsOnSIGTERM() throws {
        let harness = try ChatHarness(models: ["stuck": #"{"steps":[{"hang":true}]}"#])
        let client = Process()
        client.executableURL = URL(fileURLWithPath: ChatHarness.afm)
        client.arguments = ["respond", "--url", harness.url, "--model", "stuck", "hello"]
        client.standardOutput = FileHandle.nullDevice
        client.standardError = FileHandle.nullDevice
        try SignalState.withBlocked([SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1]) { try client.run() }
        defer {
            if client.isRunning { kill(client.processIdentifier, SIGKILL) }
            client.waitUntilExit()
        }
        #expect(waitUntil(seconds: 10) { !harness.records("generate").isEmpty })
        let mask = try #require(SignalState.blocked(in: client.processIdentifier))
        #expect(mask == 0, "afm blocks \(String(mask, radix: 16))")

        kill(client.processIdentifier, SIGTERM)
        #expect(waitUntil(seconds: 2) { !client.isRunning }, "afm ignored SIGTERM for 2 s")
        client.waitUntilExit()
        #expect(client.terminationReason == .uncaughtSignal && client.terminationStatus == SIGTERM)
        // The daemon sees the client go and cancels the generation it was waiting for.
        #expect(waitUntil(seconds: 10) { harness.records("terminal").contains { $0.contains(#""reason":"cancelled""#) } })
    }
}
