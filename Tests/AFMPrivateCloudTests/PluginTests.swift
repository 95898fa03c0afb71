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
        // WAL mode and the migration table.
        let journal = try sqlite(state + "/quota.sqlite3", "PRAGMA journal_mode;")
        #expect(journal.trimmingCharacters(in: .whitespacesAndNewlines) == "wal")
        #expect(try sqlite(state + "/quota.sqlite3", "SELECT version FROM schema_migrations;").contains("1"))
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
