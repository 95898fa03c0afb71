// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The daily quota per upstream through a real afmd: two upstreams (afmds serving the scripted echo model), each
/// with its own request quota in the gateway's SQLite file. A used-up upstream is skipped like an unhealthy one;
/// with both used up the gateway answers 429 `quota_exceeded` with the reset time; `/status` and the token monitor
/// (afmctl over the real admin socket) show what remains; a restart — even with the upstreams listed in another
/// order — keeps the counts, because an upstream is identified by its URL.
@Suite(.serialized) struct QuotaTests {
    private func cloud(_ upstreams: [String], extra: String = "") -> String {
        "Upstreams=\(upstreams.joined(separator: ", "))\nProtocol=responses\nModel=scripted-demo\nProbeIntervalSeconds=60\n\(extra)"
    }

    private func generateCount(_ upstream: CloudDaemon) -> Int {
        upstream.records().filter { $0["event"]?.stringValue == "generate" }.count
    }

    /// `/status`'s private-cloud quota once its describe document (refreshed every 5 s) satisfies `condition`.
    private func statusQuota(_ gateway: CloudDaemon, until condition: (JSONValue) -> Bool) throws -> JSONValue {
        var quota: JSONValue = .null
        let reached = waitFor(seconds: 15) {
            quota = (try? gateway.status()?["quota"]) ?? .null
            return condition(quota)
        }
        #expect(reached, "/status never showed the expected quota: \(quota.jsonString)")
        return quota
    }

    /// One snapshot of `afmctl top`, which streams until stopped: the first line it prints.
    private func topLine(_ gateway: CloudDaemon, json: Bool) throws -> String {
        let top = Process()
        top.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        top.arguments = ["--socket", gateway.daemon.adminSocket] + (json ? ["--json"] : []) + ["top", "--interval", "200"]
        let pipe = Pipe()
        top.standardOutput = pipe
        // From a thread that blocks SIGTERM, as the test runner's dispatch workers do; afmctl unblocks it itself.
        try SignalState.withBlocked([SIGTERM]) { try top.run() }
        var text = ""
        while !text.contains("\n") {
            let data = pipe.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        #expect(top.terminateGracefully(within: 2), "afmctl top ignored SIGTERM for 2 s")
        #expect(top.terminationReason == .exit && top.terminationStatus == 0, "\(top.terminationReason) \(top.terminationStatus)")
        return String(text.split(separator: "\n").first ?? "")
    }

    @Test func aUsedUpUpstreamIsSkippedThenBothUsedUpIs429AndStatusAndTheMonitorShowWhatRemains() throws {
        let first = try CloudDaemon(cloud: nil)
        let second = try CloudDaemon(cloud: nil)
        let gateway = try CloudDaemon(
            cloud: cloud(
                [first.baseURL, second.baseURL],
                extra: "DailyRequestQuota=1\nUpstream.2.DailyRequestQuota=2\nUpstream.2.DailyTokenQuota=100000\n[Cloud]\nPreference=yes"))

        // The first upstream serves one request; then its quota is used up and the second one serves.
        let one = try gateway.respond(#"{"model":"private-cloud","input":"one"}"#)
        #expect(one.status == 200, "\(one.text)")
        #expect(generateCount(first) == 1 && generateCount(second) == 0)
        for word in ["two", "three"] {
            let response = try gateway.respond(#"{"model":"private-cloud","input":"\#(word)"}"#)
            #expect(response.status == 200, "\(response.text)")
            #expect(response.json?["output_text"]?.stringValue == word || response.text.contains(word))
        }
        #expect(generateCount(first) == 1 && generateCount(second) == 2)
        #expect(gateway.daemon.log.contains("served by \(second.baseURL)"))

        // Both are used up: 429 quota_exceeded naming each upstream's limit and the next UTC midnight.
        let refused = try gateway.respond(#"{"model":"private-cloud","input":"four"}"#)
        #expect(refused.status == 429)
        #expect(refused.json?["error"]?["code"]?.stringValue == "quota_exceeded")
        let message = try #require(refused.json?["error"]?["message"]?.stringValue)
        #expect(message.contains("\(first.baseURL): 1 of 1 requests"), "\(message)")
        #expect(message.contains("\(second.baseURL): 2 of 2 requests"), "\(message)")
        #expect(generateCount(first) == 1 && generateCount(second) == 2, "a refused request reached an upstream")

        // /status: the describe document's quota, per upstream.
        let quota = try statusQuota(gateway) { $0["requests_used"]?.numberValue?.intValue == 3 }
        let resetsAt = try #require(quota["resets_at"]?.stringValue)
        #expect(message.hasSuffix("it resets at \(resetsAt)"), "\(message)")
        #expect(resetsAt.hasSuffix("T00:00:00Z"))
        #expect(quota["exhausted"]?.boolValue == true)
        #expect(quota["requests_remaining"]?.numberValue?.intValue == 0)
        let upstreams = try #require(quota["upstreams"]?.arrayValue)
        #expect(upstreams.map { $0["url"]?.stringValue ?? "" } == [first.baseURL, second.baseURL])
        #expect(upstreams.map { $0["requests_used"]?.numberValue?.intValue } == [1, 2])
        #expect(upstreams.map { $0["requests_remaining"]?.numberValue?.intValue } == [0, 0])
        #expect(upstreams[0]["tokens_remaining"] == .null)
        let secondTokens = try #require(upstreams[1]["tokens_used"]?.numberValue?.intValue)
        #expect(secondTokens > 0)
        #expect(upstreams[1]["tokens_remaining"]?.numberValue?.intValue == 100_000 - secondTokens)

        // With the cloud preferred but its quota used up, `auto` is served on-device (the scripted demo here)
        // instead of failing; the upstreams see nothing.
        let automatic = try gateway.respond(#"{"model":"auto","input":"five"}"#)
        #expect(automatic.status == 200, "\(automatic.text)")
        #expect(automatic.json?["model"]?.stringValue == "scripted-demo", "\(automatic.text)")
        #expect(generateCount(first) == 1 && generateCount(second) == 2)

        // The token monitor over the admin socket: the same figures, as JSON and as afmctl's line.
        let snapshot = try JSONParser.parse(try topLine(gateway, json: true))
        let monitored = try #require(snapshot["quota"]?.arrayValue?.first { $0["backend"]?.stringValue == "private-cloud" })
        #expect(monitored["requests_remaining"]?.numberValue?.intValue == 0)
        #expect(monitored["resets_at"]?.stringValue == resetsAt)
        #expect(monitored["upstreams"]?.arrayValue?.map { $0["requests_remaining"]?.numberValue?.intValue } == [0, 0])
        #expect(monitored["upstreams"]?[1]?["tokens_remaining"]?.numberValue?.intValue == 100_000 - secondTokens)
        #expect(snapshot["totals"]?["requests"]?.numberValue?.intValue == 4, "three cloud answers and the on-device one; the refused request is not counted")
        let line = try topLine(gateway, json: false)
        #expect(line.contains("quota.private-cloud.requests_remaining=0"), "\(line)")
        #expect(line.contains("quota.private-cloud.tokens_remaining=-"), "\(line)")
        #expect(line.contains("quota.private-cloud.resets_at=\(resetsAt)"), "\(line)")
        #expect(line.contains("quota.private-cloud[\(first.baseURL)].requests_remaining=0"), "\(line)")
        #expect(line.contains("quota.private-cloud[\(second.baseURL)].tokens_remaining=\(100_000 - secondTokens)"), "\(line)")
    }

    @Test func theCountsSurviveARestartEvenWithTheUpstreamsReordered() throws {
        let first = try CloudDaemon(cloud: nil)
        let second = try CloudDaemon(cloud: nil)
        var gateway = try CloudDaemon(cloud: cloud([first.baseURL, second.baseURL], extra: "DailyRequestQuota=1"))
        #expect(try gateway.respond(#"{"model":"private-cloud","input":"one"}"#).status == 200)
        #expect(try gateway.respond(#"{"model":"private-cloud","input":"two"}"#).status == 200)
        #expect(try gateway.respond(#"{"model":"private-cloud","input":"three"}"#).status == 429)
        #expect(FileManager.default.fileExists(atPath: gateway.quotaDatabase))

        // A restart with the upstreams in the other order and the second one's limit raised to 2.
        try gateway.restart(
            cloud: cloud([second.baseURL, first.baseURL], extra: "DailyRequestQuota=1\nUpstream.1.DailyRequestQuota=2"))
        let quota = try #require(try gateway.status()?["quota"], "describe runs at load, so /status has it at once")
        #expect(quota["upstreams"]?.arrayValue?.map { $0["url"]?.stringValue ?? "" } == [second.baseURL, first.baseURL])
        #expect(quota["upstreams"]?.arrayValue?.map { $0["requests_used"]?.numberValue?.intValue } == [1, 1])
        #expect(quota["upstreams"]?.arrayValue?.map { $0["requests_remaining"]?.numberValue?.intValue } == [1, 0])
        // The second upstream has one request left; the first none, not even after the restart.
        #expect(try gateway.respond(#"{"model":"private-cloud","input":"four"}"#).status == 200)
        #expect(generateCount(second) == 2 && generateCount(first) == 1)
        let refused = try gateway.respond(#"{"model":"private-cloud","input":"five"}"#)
        #expect(refused.status == 429)
        #expect(refused.json?["error"]?["code"]?.stringValue == "quota_exceeded")
        #expect(refused.json?["error"]?["message"]?.stringValue?.contains("it resets at ") == true)
    }
}
