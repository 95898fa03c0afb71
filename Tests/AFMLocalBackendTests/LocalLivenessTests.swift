// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Generations that send nothing visible for a while — queued behind other requests, or reading a long prompt — are
/// alive, and the host's silence watchdog (`SilenceTimeoutSeconds`) must not cut them: the backend sends progress
/// (USAGE events, which clients never see) while they wait.
@Suite struct LocalLivenessTests {
    /// A short silence limit, so the tests need only a few seconds of waiting.
    static let silence = ["AFM_BACKENDS_SILENCE_TIMEOUT_SECONDS": "2"]

    @Test func aRequestQueuedBehindALongAnswerIsNotCutOff() throws {
        // One sequence: the second request waits while the first writes up to 500 tokens (several seconds).
        let local = try LocalDaemon(settings: "ParallelSequences=1\n", environment: Self.silence)
        let long = try local.startLongStream()
        defer { long.close() }
        let started = Date()
        let response = try local.client().post(
            "/v1/responses", json: #"{"model":"on-device","input":"Say hi.","max_output_tokens":4,"temperature":0}"#)
        let waited = Date().timeIntervalSince(started)
        #expect(response.status == 200, "after \(Int(waited)) s: \(response)")
        #expect(["completed", "incomplete"].contains(response.json?["status"]?.stringValue ?? ""), "\(response)")
        // The request did wait longer than the silence limit (else this test proves nothing).
        #expect(waited > 2, "it waited only \(waited) s")
    }

    @Test func aLongPromptIsNotCutOffWhileItIsRead() throws {
        // ~5,000 prompt tokens are read in 512-token steps, for longer than the silence limit in all.
        let local = try LocalDaemon(contextTokens: 8192, settings: "ParallelSequences=1\n", environment: Self.silence)
        let long = String(repeating: "lorem ipsum dolor sit amet ", count: 850)
        let started = Date()
        let response = try local.client().post(
            "/v1/responses", json: #"{"model":"on-device","input":"\#(long)","max_output_tokens":2,"temperature":0}"#)
        let waited = Date().timeIntervalSince(started)
        #expect(response.status == 200, "after \(Int(waited)) s: \(response)")
        let input = response.json?["usage"]?["input_tokens"]?.numberValue?.intValue ?? 0
        #expect(input > 4000, "\(response)")
        #expect(waited > 2, "the prompt was read in \(waited) s")
    }
}
