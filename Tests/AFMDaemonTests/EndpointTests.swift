// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The daemon's endpoints over a real socket, served by a real afmd process with real plugins.
@Suite struct EndpointTests {
    @Test func healthStatusAndModels() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"hi"}]"#], withCFixture: true)
        let client = try harness.client()
        let health = try client.get("/health")
        #expect(health.status == 200)
        #expect(health.json?["status"] == "ok")

        let status = try client.get("/status")
        #expect(status.status == 200)
        let document = try #require(status.json)
        #expect(document["version"]?.stringValue?.isEmpty == false)
        let backends = try #require(document["backends"]?.arrayValue)
        #expect(Set(backends.compactMap { $0["id"]?.stringValue }) == ["scripted", "c-fixture"])
        #expect(backends.allSatisfy { $0["state"] == "ready" })
        let model = try #require(document["models"]?.arrayValue?.first { $0["id"] == "demo" })
        #expect(model["budgets"]?["max_input_tokens"] == 3072)
        #expect(model["budgets"]?["max_output_tokens"] == 1024)
        #expect(model["capabilities"]?["tools"] == true)

        for path in ["/v1/models", "/models"] {
            let models = try client.get(path)
            #expect(models.status == 200)
            #expect(models.json?["object"] == "list")
            let ids = models.json?["data"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            #expect(ids.contains("demo") && ids.contains("c-echo"))
        }
        #expect(harness.daemon.stop() == 0)
    }

    @Test func nonStreamingResponse() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"Hello"},{"text":", world"}]"#])
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "demo", extra: #","metadata":{"k":"v"}"#))
        #expect(response.status == 200)
        #expect(response.header("Content-Type") == "application/json")
        let body = try #require(response.json)
        #expect(body["object"] == "response")
        #expect(body["status"] == "completed")
        #expect(body["model"] == "demo")
        #expect(body["output"]?[0]?["content"]?[0]?["text"] == "Hello, world")
        #expect(body["usage"]?["output_tokens"] == 2)
        #expect(body["metadata"]?["k"] == "v")
        // The backend got exactly what the host promised in the generation request document.
        let generate = try #require(harness.records().first { $0["event"] == "generate" })
        let request = try #require(generate["request"])
        #expect(request["request_version"] == 1)
        #expect(request["model"] == "demo")
        #expect(request["max_output_tokens"] == 1024)
        #expect(request["input"]?[0]?["content"]?[0]?["text"] == "hello")
    }

    @Test func errorsUseTheOpenAIEnvelope() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"x"}]"#])
        let client = try harness.client()
        let cases: [(method: String, path: String, body: String?, status: Int, code: String)] = [
            ("POST", "/v1/responses", responsesBody(model: "nope"), 404, "model_not_found"),
            ("POST", "/v1/responses", #"{"model":"demo","input":"x""#, 400, "invalid_json"),
            ("POST", "/v1/responses", #"{"model":"demo","input":"x","previous_response_id":"resp_1"}"#, 400, "previous_response_not_found"),
            ("POST", "/v1/responses", #"{"model":"demo","input":"x","store":true}"#, 400, "unsupported_parameter"),
            ("GET", "/v1/responses", nil, 405, "method_not_allowed"),
            ("GET", "/nowhere", nil, 404, "not_found"),
        ]
        for testCase in cases {
            try client.sendRequest(testCase.method, testCase.path, body: testCase.body.map { Array($0.utf8) })
            let response = try client.readResponse()
            #expect(response.status == testCase.status, "\(testCase.path) \(response)")
            let error = response.json?["error"]
            #expect(error?["code"]?.stringValue == testCase.code, "\(response)")
            #expect(error?["message"]?.stringValue?.isEmpty == false)
            #expect(error?["type"]?.stringValue != nil)
            #expect(error?.objectValue?.keys.contains("param") == true)
        }
        // A backend error before any output is an HTTP error with the mapped status.
        let limited = try DaemonHarness(models: ["busy": #"[{"error":{"code":"rate_limited","message":"too many"}}]"#])
        let response = try limited.client().post("/v1/responses", json: responsesBody(model: "busy"))
        #expect(response.status == 429)
        #expect(response.json?["error"]?["code"] == "rate_limited")
    }

    @Test func keepAliveServesSeveralRequestsOnOneConnection() throws {
        let harness = try DaemonHarness(models: ["demo": #"[{"text":"ok"}]"#])
        let client = try harness.client()
        for _ in 0..<5 {
            let response = try client.post("/v1/responses", json: responsesBody(model: "demo"))
            #expect(response.status == 200)
            #expect(response.json?["output"]?[0]?["content"]?[0]?["text"] == "ok")
        }
        // Pipelined: three requests in one write, three answers in order.
        let request = "GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        try client.send(request)
        #expect(try client.readResponse().json?["status"] == "ok")
        #expect(try client.readResponse().json?["object"] == "list")
        #expect(try client.readResponse().json?["status"] == "ok")
    }

    /// afmd drops the mask it inherited and blocks exactly the signals its listener thread takes with `sigwait`.
    @Test func afmdBlocksOnlyTheSignalsItTakes() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"x"}]"#])
        let mask = try #require(SignalState.blocked(in: harness.daemon.process.processIdentifier))
        #expect(mask == SignalState.mask([SIGTERM, SIGINT, SIGHUP]), "afmd blocks \(String(mask, radix: 16))")
        #expect(harness.daemon.stop() == 0)
    }

    /// `nice afmd` (or systemd's `Nice=`) reaches afmd's own threads — event loops, admin, signals — and the
    /// scripted backend's generation threads they start, although afmd starts them from libdispatch workers, whose
    /// nice libdispatch sets by QoS.
    @Test func afmdsThreadsRunAtItsNiceValue() throws {
        let harness = try DaemonHarness(models: ["slow": #"[{"repeat":50,"steps":[{"text":"x"},{"delay_ms":20}]}]"#], nice: 5)
        // A generation that waits runs on a scripted worker thread, started by an event loop.
        let client = try harness.client()
        #expect(try client.post("/v1/responses", json: responsesBody(model: "slow")).status == 200)
        let pid = harness.daemon.process.processIdentifier
        var nices: [String: String] = [:]
        for task in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            let stat = readProcFile("/proc/\(pid)/task/\(task)/stat")
            guard let open = stat.range(of: "("), let close = stat.range(of: ")", options: .backwards) else { continue }
            let name = String(stat[open.upperBound..<close.lowerBound])
            // libdispatch's own workers (named after their queues' QoS) are libdispatch's business.
            guard name.hasPrefix("afm") else { continue }
            nices["\(task) \(name)"] = String(stat[close.upperBound...].split(separator: " ")[16])
        }
        #expect(nices.values.contains { _ in true }, "no afm threads found")
        #expect(nices.keys.contains { $0.hasSuffix("afm-http-0") })
        #expect(nices.values.allSatisfy { $0 == "5" }, "\(nices)")
        #expect(harness.daemon.stop() == 0)
    }

    @Test func aSigtermRightAfterStartIsNotLost() throws {
        for _ in 0..<5 {
            let harness = try DaemonHarness(models: ["m": #"[{"text":"x"}]"#])
            let started = Date()
            #expect(harness.daemon.stop() == 0)
            #expect(Date().timeIntervalSince(started) < 10)
            #expect(harness.daemon.log.contains("received SIGTERM"))
        }
    }

    @Test func commandLine() throws {
        func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestPaths.afmd)
            process.arguments = arguments
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = pipe
            try process.run()
            let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            return (process.terminationStatus, output)
        }
        let version = try run(["--version"])
        #expect(version.status == 0)
        #expect(version.output.hasPrefix("afmd ") && version.output.contains("ABI 1.1"))
        let help = try run(["--help"])
        #expect(help.status == 0)
        for flag in ["--listen", "--config", "--config-root", "--backend-dir", "--version"] { #expect(help.output.contains(flag)) }
        let bad = try run(["--frobnicate"])
        #expect(bad.status == 64)
        #expect(bad.output.contains("Error: unknown option '--frobnicate'"))
        let badListen = try run(["--listen", "nowhere"])
        #expect(badListen.status == 78)

        let root = TestPaths.makeTemporaryDirectory("afm-badconf")
        try "[Server]\nListen=127.0.0.1:1\nBogus=1\n".write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        let badConfig = try run(["--config-root", root])
        #expect(badConfig.status == 78)
        #expect(badConfig.output.contains("afmd.conf:3: unknown key 'Bogus' in [Server]"))
    }
}
