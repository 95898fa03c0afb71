// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Generations that send nothing visible for a while — queued behind other requests, or reading a long prompt — are
/// alive, and the host's silence watchdog (`SilenceTimeoutSeconds`) must not cut them: the backend sends progress
/// (USAGE events, which clients never see) while they wait.
@Suite struct LocalLivenessTests {
    /// A short silence limit (seconds), so the test waits only seconds; long enough for one decode step (a token)
    /// on a busy 2-core machine. One thread: a spinning OpenMP team collapses when other processes want the cores
    /// (README, "Threads and a busy machine"), and would make steps erratic.
    ///
    /// Progress while a long prompt is read is checked by the plugin's own tests (Plugins/local/tests): a 512-token
    /// step takes from ~1 s to tens of seconds on a shared machine, so no fixed silence limit tells it apart here.
    static let limit = 4
    static func silence(_ seconds: Int) -> [String: String] { ["AFM_BACKENDS_SILENCE_TIMEOUT_SECONDS": String(seconds)] }

    @Test func aRequestQueuedBehindALongAnswerIsNotCutOff() throws {
        // One sequence: the second request waits while the first writes up to 1,000 tokens (several seconds; 400
        // took only 3.8 s on a quiet machine, under the 4 s silence limit this test must outlast).
        let local = try LocalDaemon(settings: "ParallelSequences=1\nThreads=1\n", environment: Self.silence(Self.limit))
        // Greedy, so the first answer is long on every run (a sampled one may end after a few tokens).
        let long = try local.client()
        try long.sendRequest(
            "POST", "/v1/responses",
            body: Array(#"{"model":"on-device","input":"Write a very long essay about the oceans.","stream":true,"max_output_tokens":1000,"temperature":0}"#.utf8))
        _ = try long.readUntil { $0.components(separatedBy: "response.output_text.delta").count > 3 }
        defer { long.close() }
        let started = Date()
        let response = try local.client().post(
            "/v1/responses", json: #"{"model":"on-device","input":"Say hi.","max_output_tokens":4,"temperature":0}"#)
        let waited = Date().timeIntervalSince(started)
        #expect(response.status == 200, "after \(Int(waited)) s: \(response)")
        #expect(["completed", "incomplete"].contains(response.json?["status"]?.stringValue ?? ""), "\(response)")
        // The request did wait longer than the silence limit (else this test proves nothing).
        #expect(waited > Double(Self.limit), "it waited only \(waited) s")
    }
}
