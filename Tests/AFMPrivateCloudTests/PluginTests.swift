// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import CAFMBackendABI
import Foundation
import Testing

/// The plugin through its C ABI: settings, describe (with the `upstreams` and `quota` extension fields),
/// refusals, and the quota's persistence across instances.
@Suite(.serialized) struct PluginTests {
    @Test func withoutUpstreamsTheBackendIsDisabled() throws {
        let driver = try PluginDriver(settings: [:])
        defer { driver.destroy() }
        let describe = try driver.describe()
        #expect(describe["available"]?.boolValue == false)
        #expect(describe["reason"]?.stringValue == "private cloud is not configured")
        #expect(describe["reason_code"]?.stringValue == "not_configured")
        #expect(throws: PluginDriver.Failure.self) { try driver.generate(id: 1, request: generationRequest()) }
        do {
            _ = try driver.generate(id: 2, request: generationRequest())
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_MODEL_UNAVAILABLE)
        }
    }

    @Test func unknownSettingsAndBadValuesAreRefusedByName() throws {
        #expect(throws: PluginDriver.Failure.self) { try PluginDriver(settings: ["Upstream": "http://x/v1"]) }
        do {
            _ = try PluginDriver(settings: ["Upstreams": "http://127.0.0.1:1/v1", "Model": "m", "Protocol": "grpc"])
            Issue.record("a bad Protocol was accepted")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_INVALID_REQUEST)
            #expect(failure.description.contains("Protocol"))
        }
    }

    @Test func anAPIKeyFileReadableByOthersIsRefusedNamingTheFileAndMode() throws {
        let path = TestPaths.makeTemporaryDirectory("afm-key") + "/key"
        try "sk-test-open-file".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        do {
            _ = try PluginDriver(settings: ["Upstreams": "http://127.0.0.1:1/v1", "Model": "m", "APIKeyFile": path])
            Issue.record("a 0644 key file was accepted")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_INVALID_REQUEST)
            #expect(failure.description.contains(path))
            #expect(failure.description.contains("0644"))
            #expect(!failure.description.contains("sk-test-open-file"))
        }
    }

    @Test func allUpstreamsDownMakesDescribeUnavailableWithAReasonPerUpstream() throws {
        let first = closedLoopbackPort()
        let second = closedLoopbackPort()
        let driver = try PluginDriver(settings: [
            "Upstreams": "http://127.0.0.1:\(first)/v1, http://127.0.0.1:\(second)/v1", "Model": "m",
            "ProbeIntervalSeconds": "60",
        ])
        defer { driver.destroy() }
        let describe = try driver.describe()
        #expect(describe["available"]?.boolValue == false)
        #expect(describe["reason_code"]?.stringValue == "upstream_unreachable")
        let reason = try #require(describe["reason"]?.stringValue)
        #expect(reason.contains("127.0.0.1:\(first)") && reason.contains("127.0.0.1:\(second)"))
        let upstreams = try #require(describe["upstreams"]?.arrayValue)
        #expect(upstreams.count == 2)
        for entry in upstreams {
            #expect(entry["healthy"]?.boolValue == false)
            #expect(entry["reason"]?.stringValue?.contains("connection failed") == true)
            #expect(entry["last_probe"]?.stringValue != nil)
        }
        // A request still tries every upstream, then ends with ERROR naming them.
        let events = try driver.generate(id: 7, request: generationRequest())
        #expect(events.waitForTerminal(seconds: 30))
        #expect(events.last?.type == AFM_EVENT_ERROR)
        #expect(events.last?.code == AFM_ERR_MODEL_UNAVAILABLE)
        #expect(events.last?.text.contains("127.0.0.1:\(second)") == true)
    }

    @Test func imagesNeedVisionAndNoneNeedsOptionalReasoning() throws {
        let driver = try PluginDriver(settings: [
            "Upstreams": "http://127.0.0.1:\(closedLoopbackPort())/v1", "Model": "m", "Reasoning": "yes",
        ])
        defer { driver.destroy() }
        let image = #"{"request_version":1,"model":"private-cloud","input":[{"type":"message","role":"user","content":[{"type":"image","mime_type":"image/png","data_base64":"iVBORw0KGgo="}]}],"max_output_tokens":8}"#
        do {
            _ = try driver.generate(id: 1, request: image)
            Issue.record("an image was accepted without Vision=yes")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_UNSUPPORTED_CAPABILITY)
        }
        do {
            _ = try driver.generate(id: 2, request: generationRequest(extra: #","reasoning_effort":"none""#).replacingOccurrences(of: #""reasoning_effort":null,"#, with: ""))
            Issue.record("reasoning_effort none was accepted with Reasoning=yes")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_UNSUPPORTED_CAPABILITY)
        }
        let describe = try driver.describe()
        #expect(describe["models"]?[0]?["capabilities"]?["reasoning"]?.boolValue == true)
        #expect(describe["models"]?[0]?["capabilities"]?["reasoning_optional"]?.boolValue == false)
    }

    /// The quota is persisted in SQLite in the state directory: a second instance (a restart) sees the first's
    /// requests, refuses with quota_exceeded and the reset time, and describe shows what remains.
    @Test func dailyRequestQuotaSurvivesARestart() throws {
        let upstream = try CloudDaemon(cloud: nil)  // an afmd serving scripted-demo (echo) as the upstream
        let state = TestPaths.makeTemporaryDirectory("afm-cloud-state") + "/private-cloud"
        let settings = [
            "Upstreams": upstream.baseURL, "Model": "scripted-demo", "DailyRequestQuota": "2",
            "DailyTokenQuota": "100000",
        ]
        do {
            let first = try PluginDriver(settings: settings, stateDirectory: state)
            for id in 1...2 as ClosedRange<UInt64> {
                let events = try first.generate(id: id, request: generationRequest(text: "one two three"))
                #expect(events.waitForTerminal())
                #expect(events.last?.type == AFM_EVENT_DONE)
                #expect(events.text == "one two three")
            }
            let quota = try first.describe()["quota"]
            #expect(quota?["requests_remaining"]?.numberValue?.intValue == 0)
            #expect((quota?["tokens_remaining"]?.numberValue?.intValue ?? 0) < 100000)
            first.destroy()
        }
        #expect(FileManager.default.fileExists(atPath: state + "/quota.sqlite3"))
        let second = try PluginDriver(settings: settings, stateDirectory: state)
        defer { second.destroy() }
        let quota = try #require(try second.describe()["quota"])
        #expect(quota["requests_remaining"]?.numberValue?.intValue == 0)
        let resetsAt = try #require(quota["resets_at"]?.stringValue)
        #expect(resetsAt.hasSuffix("T00:00:00Z"))
        do {
            _ = try second.generate(id: 3, request: generationRequest())
            Issue.record("a request over the quota was accepted after a restart")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_QUOTA_EXCEEDED)
            #expect(failure.description.contains(resetsAt))
        }
        // WAL mode, the migration table, and the counts keyed by the upstream's URL.
        let journal = try sqlite(state + "/quota.sqlite3", "PRAGMA journal_mode;")
        #expect(journal.trimmingCharacters(in: .whitespacesAndNewlines) == "wal")
        #expect(try sqlite(state + "/quota.sqlite3", "SELECT version FROM schema_migrations;") == "1\n2\n")
        #expect(
            try sqlite(state + "/quota.sqlite3", "SELECT upstream, requests FROM upstream_daily_usage;")
                == "\(upstream.baseURL)|2\n")
    }

    @Test func perUpstreamQuotaKeysAreValidatedByName() throws {
        let settings = ["Upstreams": "http://127.0.0.1:1/v1, http://127.0.0.1:2/v1", "Model": "m"]
        for (key, value, mention) in [
            ("Upstream.3.DailyRequestQuota", "5", "names upstream 3, but Upstreams lists 2"),
            ("Upstream.1.DailyTokenQuota", "-1", "Upstream.1.DailyTokenQuota"),
            ("Upstream.2.DailyRequestQuota", "many", "Upstream.2.DailyRequestQuota"),
            ("Upstream.1.DailyQuota", "5", "unknown setting"),
        ] {
            do {
                _ = try PluginDriver(settings: settings.merging([key: value]) { $1 })
                Issue.record("\(key)=\(value) was accepted")
            } catch let failure as PluginDriver.Failure {
                #expect(failure.code == AFM_ERR_INVALID_REQUEST)
                #expect(failure.description.contains(mention), "\(failure.description)")
            }
        }
        // The URL identifies an upstream (its counts are keyed by it), so it may be listed once only.
        do {
            _ = try PluginDriver(settings: ["Upstreams": "http://127.0.0.1:1/v1, http://127.0.0.1:1/v1/", "Model": "m"])
            Issue.record("a repeated upstream URL was accepted")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_INVALID_REQUEST)
            #expect(failure.description.contains("entry 2 repeats entry 1"), "\(failure.description)")
        }
    }

    /// `DailyRequestQuota` is every upstream's default; `Upstream.<n>.…` overrides it (0 = unlimited). A request
    /// goes to the first upstream with quota left; an upstream that failed before answering gets its request back;
    /// when every upstream is used up, generate refuses with quota_exceeded naming each one and the reset time.
    @Test func eachUpstreamHasItsOwnQuotaAndAUsedUpOneIsSkipped() throws {
        let first = try CloudDaemon(cloud: nil)
        let third = try CloudDaemon(cloud: nil)
        let down = "http://127.0.0.1:\(closedLoopbackPort())/v1"
        let state = TestPaths.makeTemporaryDirectory("afm-cloud-state") + "/private-cloud"
        let driver = try PluginDriver(
            settings: [
                "Upstreams": "\(first.baseURL), \(down), \(third.baseURL)", "Model": "scripted-demo",
                "DailyRequestQuota": "1", "Upstream.2.DailyRequestQuota": "0", "Upstream.3.DailyRequestQuota": "2",
                "Upstream.3.DailyTokenQuota": "100000", "ProbeIntervalSeconds": "3600",
            ], stateDirectory: state)
        defer { driver.destroy() }
        func served(_ id: UInt64) throws -> Int32? {
            let events = try driver.generate(id: id, request: generationRequest(text: "request \(id)"))
            #expect(events.waitForTerminal())
            return events.last?.type
        }
        #expect(try served(1) == AFM_EVENT_DONE)
        #expect(first.records().filter { $0["event"]?.stringValue == "generate" }.count == 1)
        // The first upstream is used up; the second is down (probed unhealthy at create, so ordered last); the
        // third serves twice.
        #expect(try served(2) == AFM_EVENT_DONE)
        #expect(try served(3) == AFM_EVENT_DONE)
        #expect(third.records().filter { $0["event"]?.stringValue == "generate" }.count == 2)
        #expect(first.records().filter { $0["event"]?.stringValue == "generate" }.count == 1)

        let quota = try #require(try driver.describe()["quota"])
        let upstreams = try #require(quota["upstreams"]?.arrayValue)
        #expect(upstreams.map { $0["url"]?.stringValue ?? "" } == [first.baseURL, down, third.baseURL])
        #expect(upstreams.map { $0["requests_used"]?.numberValue?.intValue } == [1, 0, 2])
        #expect(upstreams.map { $0["daily_request_quota"]?.numberValue?.intValue } == [1, nil, 2])
        #expect(upstreams.map { $0["requests_remaining"]?.numberValue?.intValue } == [0, nil, 0])
        #expect(upstreams.map { $0["exhausted"]?.boolValue } == [true, false, true])
        #expect((upstreams[2]["tokens_used"]?.numberValue?.intValue ?? 0) > 0)
        #expect(upstreams[2]["tokens_remaining"]?.numberValue?.intValue == 100000 - (upstreams[2]["tokens_used"]?.numberValue?.intValue ?? 0))
        #expect(quota["requests_used"]?.numberValue?.intValue == 3)
        #expect(quota["requests_remaining"] == .null, "the unlimited upstream makes the backend unlimited")
        #expect(quota["exhausted"]?.boolValue == false)

        // Only the unlimited (and unreachable) upstream is left: it is tried, fails, and the request fails with
        // model_unavailable naming the used-up upstreams too; its request is refunded.
        let events = try driver.generate(id: 4, request: generationRequest())
        #expect(events.waitForTerminal(seconds: 30))
        #expect(events.last?.type == AFM_EVENT_ERROR)
        #expect(events.last?.code == AFM_ERR_MODEL_UNAVAILABLE)
        let message = events.last?.text ?? ""
        #expect(message.contains(down) && message.contains("\(first.baseURL): 1 of 1 requests"), "\(message)")
        #expect(message.contains("\(third.baseURL): 2 of 2 requests"), "\(message)")
        #expect(try driver.describe()["quota"]?["upstreams"]?[1]?["requests_used"]?.numberValue?.intValue == 0)
    }

    @Test func whenEveryUpstreamIsUsedUpGenerateRefusesNamingEachAndTheResetTime() throws {
        let first = try CloudDaemon(cloud: nil)
        let second = try CloudDaemon(cloud: nil)
        let driver = try PluginDriver(settings: [
            "Upstreams": "\(first.baseURL), \(second.baseURL)", "Model": "scripted-demo", "DailyRequestQuota": "1",
        ])
        defer { driver.destroy() }
        for id in 1...2 as ClosedRange<UInt64> {
            let events = try driver.generate(id: id, request: generationRequest())
            #expect(events.waitForTerminal())
            #expect(events.last?.type == AFM_EVENT_DONE)
        }
        #expect(first.records().filter { $0["event"]?.stringValue == "generate" }.count == 1)
        #expect(second.records().filter { $0["event"]?.stringValue == "generate" }.count == 1)
        let quota = try #require(try driver.describe()["quota"])
        #expect(quota["exhausted"]?.boolValue == true)
        #expect(quota["requests_remaining"]?.numberValue?.intValue == 0)
        #expect(quota["daily_request_quota"]?.numberValue?.intValue == 2)
        let resetsAt = try #require(quota["resets_at"]?.stringValue)
        do {
            _ = try driver.generate(id: 3, request: generationRequest())
            Issue.record("a request was accepted with every upstream's quota used up")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_QUOTA_EXCEEDED)
            #expect(
                failure.description == "every private-cloud upstream's daily quota is used up (\(first.baseURL): 1 of 1 "
                    + "requests; \(second.baseURL): 1 of 1 requests); it resets at \(resetsAt)")
        }
    }

    /// Counts from before per-upstream counting (migration 1's backend-wide `daily_usage`) count against every
    /// upstream on their day, so an upgrade never hands out fresh quota; other days are ignored.
    @Test func backendWideCountsFromMigrationOneCountForEveryUpstream() throws {
        let state = TestPaths.makeTemporaryDirectory("afm-cloud-state") + "/private-cloud"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let today = formatter.string(from: Date())
        _ = try sqlite(
            state + "/quota.sqlite3",
            """
            CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
            CREATE TABLE daily_usage (day TEXT PRIMARY KEY, requests INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0);
            INSERT INTO schema_migrations VALUES (1, '2026-01-01T00:00:00Z');
            INSERT INTO daily_usage VALUES ('\(today)', 3, 700), ('2000-01-01', 50, 5000);
            """)
        let driver = try PluginDriver(
            settings: [
                "Upstreams": "http://127.0.0.1:\(closedLoopbackPort())/v1, http://127.0.0.1:\(closedLoopbackPort())/v1",
                "Model": "m", "DailyRequestQuota": "5", "DailyTokenQuota": "1000", "ProbeIntervalSeconds": "3600",
            ], stateDirectory: state)
        defer { driver.destroy() }
        let quota = try #require(try driver.describe()["quota"])
        for upstream in quota["upstreams"]?.arrayValue ?? [] {
            #expect(upstream["requests_used"]?.numberValue?.intValue == 3)
            #expect(upstream["requests_remaining"]?.numberValue?.intValue == 2)
            #expect(upstream["tokens_remaining"]?.numberValue?.intValue == 300)
        }
        #expect(quota["upstreams"]?.arrayValue?.count == 2)
        #expect(quota["requests_used"]?.numberValue?.intValue == 3, "the old counts are added once to the total")
        #expect(try sqlite(state + "/quota.sqlite3", "SELECT version FROM schema_migrations;") == "1\n2\n")
    }

    /// The quota database is a file anyone with access can edit or damage: counts near `Int64.max` (or negative)
    /// must not trap the describe or generate that adds them up; they saturate (a negative count reads as 0).
    @Test func hugeCountsInTheQuotaDatabaseSaturate() throws {
        let state = TestPaths.makeTemporaryDirectory("afm-cloud-state") + "/private-cloud"
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        let today = formatter.string(from: Date())
        let upstreams = [
            "http://127.0.0.1:\(closedLoopbackPort())/v1", "http://127.0.0.1:\(closedLoopbackPort())/v1",
        ]
        _ = try sqlite(
            state + "/quota.sqlite3",
            """
            CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL);
            CREATE TABLE daily_usage (day TEXT PRIMARY KEY, requests INTEGER NOT NULL DEFAULT 0, tokens INTEGER NOT NULL DEFAULT 0);
            INSERT INTO schema_migrations VALUES (1, '2026-01-01T00:00:00Z');
            INSERT INTO daily_usage VALUES ('\(today)', -9223372036854775808, 9223372036854775000);
            """)
        let settings = [
            "Upstreams": upstreams.joined(separator: ", "), "Model": "m", "DailyTokenQuota": "1000",
            "ProbeIntervalSeconds": "3600",
        ]
        do {  // the first open applies migration 2; then the per-upstream rows are "edited"
            let driver = try PluginDriver(settings: settings, stateDirectory: state)
            driver.destroy()
        }
        _ = try sqlite(
            state + "/quota.sqlite3",
            """
            INSERT INTO upstream_daily_usage (upstream, day, requests, tokens) VALUES
              ('\(upstreams[0])', '\(today)', 9223372036854775807, 9223372036854775000),
              ('\(upstreams[1])', '\(today)', 9223372036854775807, -9223372036854775808);
            """)
        let driver = try PluginDriver(settings: settings, stateDirectory: state)
        defer { driver.destroy() }
        let quota = try #require(try driver.describe()["quota"])
        #expect(quota["upstreams"]?.arrayValue?.count == 2)
        for (upstream, tokens) in zip(quota["upstreams"]?.arrayValue ?? [], [Int.max, 9_223_372_036_854_775_000]) {
            #expect(upstream["requests_used"]?.numberValue?.intValue == Int.max)
            #expect(upstream["tokens_used"]?.numberValue?.intValue == tokens)
            #expect(upstream["tokens_remaining"]?.numberValue?.intValue == 0)
            #expect(upstream["exhausted"]?.boolValue == true)
        }
        #expect(quota["requests_used"]?.numberValue?.intValue == Int.max)
        #expect(quota["tokens_used"]?.numberValue?.intValue == Int.max)
        #expect(quota["exhausted"]?.boolValue == true)
        do {
            _ = try driver.generate(id: 1, request: generationRequest())
            Issue.record("a request was accepted with every token quota used up")
        } catch let failure as PluginDriver.Failure {
            #expect(failure.code == AFM_ERR_QUOTA_EXCEEDED)
        }
    }

    private func sqlite(_ path: String, _ sql: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["sqlite3", path, sql]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return text
    }
}
