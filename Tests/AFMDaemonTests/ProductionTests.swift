// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// Running afmd in production, on a real daemon: API keys (file formats, both headers, reload, the 401 envelope),
/// the refusal to serve a non-loopback address without keys, readiness and drain, admission control, the
/// Unix-socket listener, systemd socket activation and the access log. `/metrics` values are checked with a real
/// Prometheus parser in Tests/clients/test_metrics.py.
@Suite struct ProductionTests {
    static let aliceKey = "sk-alice-0123456789"
    static let ciKey = "sk-ci-abcdef"
    static let plainKey = "sk-plain-unnamed"
    static let bobKey = "sk-bob-hashed-key"

    /// A key file with every format: an unnamed key, NAME:KEY, NAME:sha256:HEX and a comment.
    static func writeKeyFile(_ directory: String, extra: String = "") throws -> String {
        let path = directory + "/keys"
        let bobDigest = sha256Hex(bobKey)
        try """
            # API keys of this node
            alice:\(aliceKey)
            \(plainKey)

            bob:sha256:\(bobDigest)
            \(extra)
            """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// The digest as `sha256sum` (coreutils) prints it: an independent implementation of the file's format.
    static func sha256Hex(_ text: String) -> String {
        let result = try? CommandOutput.run("/bin/sh", ["-c", "printf %s '\(text)' | sha256sum"])
        return String(result?.output.prefix(64) ?? "")
    }

    /// One snapshot of the live token monitor (`afmctl --json top`, its first line).
    static func monitorSnapshot(_ daemon: DaemonProcess) throws -> JSONValue {
        let top = Process()
        top.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        top.arguments = ["--socket", daemon.adminSocket, "--json", "top", "--interval", "200"]
        let pipe = Pipe()
        top.standardOutput = pipe
        try top.run()
        let line = String(decoding: pipe.fileHandleForReading.availableDataLine(), as: UTF8.self).split(separator: "\n").first ?? ""
        _ = top.terminateGracefully(within: 2)
        return try JSONParser.parse(String(line))
    }

    func post(_ harness: DaemonHarness, headers: [String: String]) throws -> TestHTTPClient.Response {
        try harness.client().post("/v1/responses", json: responsesBody(model: "m"), headers: headers)
    }

    @Test func apiKeysGuardTheAPIAndReload() throws {
        let scratch = TestPaths.makeTemporaryDirectory("afm-keys")
        let keys = try Self.writeKeyFile(scratch)
        let harness = try DaemonHarness(
            models: ["m": #"[{"text":"ok"}]"#], config: "[Server]\nAPIKeyFile=\(keys)\nAccessLog=yes\n")

        // Missing and wrong keys: 401 in OpenAI's envelope, with WWW-Authenticate.
        let missing = try post(harness, headers: [:])
        #expect(missing.status == 401)
        #expect(missing.header("WWW-Authenticate") == "Bearer")
        #expect(missing.json?["error"]?["code"] == "invalid_api_key")
        #expect(missing.json?["error"]?["type"] == "invalid_request_error")
        let wrong = try post(harness, headers: ["Authorization": "Bearer sk-alice-0123456788"])
        #expect(wrong.status == 401)
        #expect(wrong.json?["error"]?["code"] == "invalid_api_key")
        #expect(try post(harness, headers: ["Authorization": "Basic \(Self.aliceKey)"]).status == 401)

        // Every format and both headers.
        #expect(try post(harness, headers: ["Authorization": "Bearer \(Self.aliceKey)"]).status == 200)
        #expect(try post(harness, headers: ["authorization": "bearer \(Self.aliceKey)"]).status == 200)
        #expect(try post(harness, headers: ["x-api-key": Self.plainKey]).status == 200)
        #expect(try post(harness, headers: ["X-Api-Key": Self.bobKey]).status == 200)

        // Open and guarded small endpoints.
        #expect(try harness.client().get("/health").status == 200)
        #expect(try harness.client().get("/ready").status == 200)
        #expect(try harness.client().get("/metrics").status == 401)
        #expect(try harness.client().get("/v1/models").status == 401)
        #expect(try harness.client().get("/metrics", headers: ["x-api-key": Self.aliceKey]).status == 200)

        // Names, never keys: the access log, the token monitor and the metrics.
        let log = harness.daemon.log
        #expect(log.contains("afmd.access: request key=alice dialect=responses model=m status=200"))
        #expect(log.contains("key=key-3"))
        #expect(log.contains("key=bob"))
        #expect(log.contains("status=401"))
        for secret in [Self.aliceKey, Self.plainKey, Self.bobKey] { #expect(!log.contains(secret)) }
        let requests = try Self.monitorSnapshot(harness.daemon)["requests"]?.arrayValue ?? []
        #expect(Set(requests.compactMap { $0["key"]?.stringValue }) == ["alice", "key-3", "bob"])
        let metrics = try harness.client().get("/metrics", headers: ["x-api-key": Self.aliceKey]).text
        #expect(metrics.contains(#"afm_api_key_requests_total{key="alice"} 2"#))
        #expect(!metrics.contains(Self.aliceKey))

        // Reload: alice goes, ci comes (afmctl reload), then bob goes (SIGHUP).
        try """
            ci:\(Self.ciKey)
            bob:sha256:\(Self.sha256Hex(Self.bobKey))
            """.write(toFile: keys, atomically: true, encoding: .utf8)
        #expect(try harness.daemon.afmctl(["reload"]).status == 0)
        #expect(try post(harness, headers: ["Authorization": "Bearer \(Self.aliceKey)"]).status == 401)
        #expect(try post(harness, headers: ["Authorization": "Bearer \(Self.ciKey)"]).status == 200)
        try "ci:\(Self.ciKey)\n".write(toFile: keys, atomically: true, encoding: .utf8)
        kill(harness.daemon.process.processIdentifier, SIGHUP)
        #expect(waitUntil(seconds: 10) { (try? post(harness, headers: ["x-api-key": Self.bobKey]).status) == 401 })
        #expect(try post(harness, headers: ["x-api-key": Self.ciKey]).status == 200)

        // A broken key file fails the reload and keeps the keys in force.
        try "ci:\(Self.ciKey)\nbad name:key\n".write(toFile: keys, atomically: true, encoding: .utf8)
        let failed = try harness.daemon.afmctl(["reload"])
        #expect(failed.status != 0)
        #expect(failed.errors.contains("keys:2"), "\(failed.errors)")
        #expect(try post(harness, headers: ["x-api-key": Self.ciKey]).status == 200)
    }

    /// The 401 comes in each dialect's envelope, and every dialect's requests are counted by dialect and by key.
    @Test func eachDialectGetsItsOwnUnauthorizedEnvelope() throws {
        let keys = try Self.writeKeyFile(TestPaths.makeTemporaryDirectory("afm-keys"))
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#], config: "[Server]\nAPIKeyFile=\(keys)\n")
        let chatBody = #"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#
        let messagesBody = #"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#

        let responses = try harness.client().post("/v1/responses", json: responsesBody(model: "m"))
        #expect(responses.status == 401)
        #expect(responses.json?["error"]?["code"] == "invalid_api_key")
        let chat = try harness.client().post("/v1/chat/completions", json: chatBody, headers: ["Authorization": "Bearer nope"])
        #expect(chat.status == 401)
        #expect(chat.json?["error"]?["code"] == "invalid_api_key")
        #expect(chat.json?["error"]?["type"] == "invalid_request_error")
        let messages = try harness.client().post("/v1/messages", json: messagesBody, headers: ["x-api-key": "nope", "anthropic-version": "2023-06-01"])
        #expect(messages.status == 401)
        #expect(messages.json?["type"] == "error")
        #expect(messages.json?["error"]?["type"] == "authentication_error")
        let count = try harness.client().post("/v1/messages/count_tokens", json: messagesBody)
        #expect(count.status == 401)
        #expect(count.json?["error"]?["type"] == "authentication_error")

        #expect(try harness.client().post("/v1/chat/completions", json: chatBody, headers: ["Authorization": "Bearer \(Self.aliceKey)"]).status == 200)
        let anthropic = try harness.client().post(
            "/v1/messages", json: messagesBody, headers: ["x-api-key": Self.aliceKey, "anthropic-version": "2023-06-01"])
        #expect(anthropic.status == 200, "\(anthropic)")
        let metrics = try harness.client().get("/metrics", headers: ["x-api-key": Self.aliceKey]).text
        for (dialect, code) in [("responses", 401), ("chat_completions", 401), ("chat_completions", 200), ("messages", 401), ("messages", 200)] {
            #expect(metrics.contains(#"afm_requests_total{dialect="\#(dialect)",code="\#(code)"}"#), "\(dialect) \(code)")
        }
        #expect(metrics.contains(#"afm_request_success_total{model="m",backend="scripted",finished_reason="stop"} 2"#))
    }

    @Test func metricsCanBeOpenWhileTheAPIIsGuarded() throws {
        let scratch = TestPaths.makeTemporaryDirectory("afm-keys")
        let keys = try Self.writeKeyFile(scratch)
        let harness = try DaemonHarness(
            models: ["m": #"[{"text":"ok"}]"#], config: "[Server]\nAPIKeyFile=\(keys)\nMetricsRequireKey=no\n")
        let metrics = try harness.client().get("/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.header("Content-Type") == "text/plain; version=0.0.4; charset=utf-8")
        #expect(try post(harness, headers: [:]).status == 401)
    }

    /// `/ready` fails with 503 `unavailable` while no backend is ready (here the only backend failed to load: its
    /// script is missing; and a node with no backend at all), naming each backend's state; `/health` still answers.
    @Test func readinessFailsWhenNoBackendIsReady() throws {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let missing = TestPaths.makeTemporaryDirectory("afm-script") + "/missing.json"
        let broken = try DaemonProcess(backendDirectory: directory.path, config: "[Backend.scripted]\nScript=\(missing)\n")
        let client = { try TestHTTPClient(port: broken.port) }
        // Loading may still be under way at first; the backend ends up failed and stays so.
        #expect(waitUntil(seconds: 10) { (try? client().get("/ready").json?["backends"]?[0]?["state"]) == "failed" }, "\(broken.log)")
        let ready = try client().get("/ready")
        #expect(ready.status == 503)
        #expect(ready.json?["status"] == "unavailable")
        #expect(ready.json?["reason"] == "no backend is ready")
        #expect(ready.json?["backends"] == [["id": "scripted", "state": "failed"]])
        let health = try client().get("/health")
        #expect(health.status == 200)
        #expect(health.json?["status"] == "ok")
        #expect(broken.stop() == 0)

        let none = try DaemonProcess(backendDirectory: BackendDirectoryBuilder().path)
        let empty = try TestHTTPClient(port: none.port).get("/ready")
        #expect(empty.status == 503)
        #expect(empty.json?["status"] == "unavailable")
        #expect(empty.json?["reason"] == "no backend is ready")
        #expect(empty.json?["backends"] == [])
        #expect(try TestHTTPClient(port: none.port).get("/health").status == 200)
        #expect(none.stop() == 0)
    }

    /// The access log is off by default; `AccessLog=yes` (here turned on by a reload) writes one line per API request
    /// with its token counts, time to first token and duration, and never the request's body.
    @Test func accessLogCarriesTokensAndTimesButNoBody() throws {
        let steps = #"[{"delay_ms":60},{"text":"one two three"}]"#
        let harness = try DaemonHarness(models: ["before": steps, "after": steps])
        let canary = "zebra-canary-7f3a91"
        #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "before", input: canary)).status == 200)

        let conf = harness.daemon.root + "/afmd.conf"
        let settings = try String(contentsOfFile: conf, encoding: .utf8)
        try (settings + "\n[Server]\nAccessLog=yes\n").write(toFile: conf, atomically: true, encoding: .utf8)
        #expect(try harness.daemon.afmctl(["reload"]).status == 0)
        let response = try harness.client().post("/v1/responses", json: responsesBody(model: "after", input: canary))
        #expect(response.status == 200)
        let usage = response.json?["usage"]
        func accessLines() -> [Substring] { harness.daemon.log.split(separator: "\n").filter { $0.contains("afmd.access: request") } }
        #expect(waitUntil(seconds: 10) { !accessLines().isEmpty }, "\(harness.daemon.log)")

        // Only the request made after the reload: the one before it, with the default, logged nothing.
        let lines = accessLines()
        #expect(lines.count == 1, "\(lines)")
        let fields = Dictionary(
            (lines.first ?? "").split(separator: " ").compactMap { field -> (String, String)? in
                let parts = field.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1])) : nil
            }, uniquingKeysWith: { first, _ in first })
        #expect(fields["model"] == "after")
        #expect(fields["status"] == "200")
        #expect(fields["dialect"] == "responses")
        #expect(fields["prompt_tokens"].flatMap { Int($0) } == usage?["input_tokens"]?.numberValue?.intValue)
        #expect(fields["generation_tokens"].flatMap { Int($0) } == usage?["output_tokens"]?.numberValue?.intValue)
        #expect((fields["generation_tokens"].flatMap { Int($0) } ?? 0) > 0)
        let ttft = try #require(fields["ttft_ms"].flatMap { Double($0) }, "\(fields)")
        let duration = try #require(fields["duration_ms"].flatMap { Double($0) }, "\(fields)")
        // The script waits 60 ms before its first token.
        #expect(ttft >= 60)
        #expect(duration >= ttft)
        #expect(!harness.daemon.log.contains(canary))
    }

    /// Secure by default: a non-loopback address needs keys, or an explicit AllowUnauthenticated=yes.
    @Test func aNonLoopbackAddressNeedsKeys() throws {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let refused = try CommandOutput.run(
            TestPaths.afmd, ["--listen", "0.0.0.0:0", "--config-root", TestPaths.makeTemporaryDirectory("afmd-root"),
                "--backend-dir", directory.path])
        #expect(refused.status == 1)
        #expect(refused.output.contains("refusing to listen on 0.0.0.0:0 without API keys"), "\(refused.output)")
        #expect(refused.output.contains("AllowUnauthenticated=yes"))

        let allowed = try DaemonProcess(
            backendDirectory: directory.path, config: "[Server]\nAllowUnauthenticated=yes\n", extraArguments: ["--listen", "0.0.0.0:0"],
            waitFor: "listening on 0.0.0.0:")
        #expect(allowed.log.contains("listening on 0.0.0.0:"))
        allowed.stop()
        let keys = try Self.writeKeyFile(TestPaths.makeTemporaryDirectory("afm-keys"))
        let guarded = try DaemonProcess(
            backendDirectory: directory.path, config: "[Server]\nAPIKeyFile=\(keys)\n", extraArguments: ["--listen", "0.0.0.0:0"],
            waitFor: "listening on 0.0.0.0:")
        #expect(guarded.log.contains("listening on 0.0.0.0:"))
        // A reload that would drop the keys while listening there is refused, and the keys stay.
        try "".write(toFile: guarded.root + "/afmd.conf", atomically: true, encoding: .utf8)
        let reload = try guarded.afmctl(["reload"])
        #expect(reload.status != 0)
        #expect(reload.errors.contains("without API keys"), "\(reload.errors)")
        #expect(try TestHTTPClient(port: guarded.port).get("/v1/models").status == 401)
        #expect(guarded.stop() == 0)
    }

    /// SIGTERM: /ready turns 503 at once while requests are still served for the drain delay; then the daemon exits.
    @Test func sigtermFailsReadinessFirstThenDrains() throws {
        let harness = try DaemonHarness(
            models: ["m": #"[{"text":"ok"}]"#, "slow": #"[{"delay_ms":1500},{"text":"late"}]"#],
            environment: ["AFM_SERVER_DRAIN_DELAY_SECONDS": "2"])
        #expect(try harness.client().get("/ready").json?["status"] == "ready")
        let slow = try harness.client()
        try slow.sendRequest("POST", "/v1/responses", body: Array(responsesBody(model: "slow").utf8))
        let started = Date()
        kill(harness.daemon.process.processIdentifier, SIGTERM)
        #expect(waitUntil(seconds: 5) { (try? harness.client().get("/ready").status) == 503 })
        let ready = try harness.client().get("/ready")
        #expect(ready.json?["status"] == "draining")
        // Still serving during the delay: a balancer that has not noticed yet loses nothing.
        #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "m")).status == 200)
        #expect(try slow.readResponse().status == 200)
        harness.daemon.process.waitUntilExit()
        #expect(harness.daemon.process.terminationStatus == 0)
        #expect(Date().timeIntervalSince(started) >= 2)
    }

    /// `afmctl listener start` while afmd stops (SIGTERM's drain delay) is refused: the node stays unready and
    /// exits. Before, the start turned /ready back to 200 for a balancer just before the listener closed for good.
    @Test func listenerStartIsRefusedWhileStopping() throws {
        let harness = try DaemonHarness(
            models: ["m": #"[{"text":"ok"}]"#], environment: ["AFM_SERVER_DRAIN_DELAY_SECONDS": "3"])
        kill(harness.daemon.process.processIdentifier, SIGTERM)
        #expect(waitUntil(seconds: 5) { (try? harness.client().get("/ready").status) == 503 })
        let started = try harness.daemon.afmctl(["listener", "start"])
        #expect(started.status != 0 && started.errors.contains("afmd is stopping"), "\(started.status) \(started.errors)")
        #expect(try harness.client().get("/ready").status == 503)
        harness.daemon.process.waitUntilExit()
        #expect(harness.daemon.process.terminationStatus == 0)
    }

    /// `afmctl drain` fails readiness, then closes the listener; `afmctl listener start` serves again. A reload
    /// during load keeps the node ready.
    @Test func afmctlDrainAndListenerStart() throws {
        let harness = try DaemonHarness(
            models: ["m": #"[{"text":"ok"}]"#], environment: ["AFM_SERVER_DRAIN_DELAY_SECONDS": "1"])
        let port = harness.port
        let load = Thread.detachNewThreadWithResult {
            (0..<40).map { _ in (try? TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "m")).status) ?? 0 }
        }
        #expect(try harness.daemon.afmctl(["reload", "scripted"]).status == 0)
        #expect(try harness.client().get("/ready").status == 200)
        #expect(load.value.allSatisfy { $0 == 200 })

        let socket = harness.daemon.adminSocket
        let drain = Thread.detachNewThreadWithResult {
            try? CommandOutput.run(TestPaths.binDirectory + "/afmctl", ["--socket", socket, "drain"])
        }
        #expect(waitUntil(seconds: 5) { (try? harness.client().get("/ready").status) == 503 })
        let drained = drain.value
        #expect(drained?.status == 0, "\(drained?.output ?? "")")
        #expect(throws: (any Error).self) { try harness.client().get("/ready") }
        let status = try JSONParser.parse(try harness.daemon.afmctl(["--json", "status"]).output)
        #expect(status["listener"]?["state"] == "draining")

        #expect(try harness.daemon.afmctl(["listener", "start"]).status == 0)
        // Listen=127.0.0.1:0 picks a new port: read it from the status, as an operator would.
        let address = try #require(try JSONParser.parse(try harness.daemon.afmctl(["--json", "status"]).output)["listen"]?.stringValue)
        let newPort = try #require(Int(address.split(separator: ":").last ?? ""))
        #expect(try TestHTTPClient(port: newPort).get("/ready").status == 200)
    }

    /// `afmctl listener start` while a drain waits out its delay ends the drain: the listener stays open and the node
    /// ready. Before, the drain went on after its delay and closed the listener `listener start` had just reported
    /// running (status "stopped", connections refused, until a second start).
    @Test func listenerStartDuringADrainKeepsTheListener() throws {
        let harness = try DaemonHarness(
            models: ["m": #"[{"text":"ok"}]"#], environment: ["AFM_SERVER_DRAIN_DELAY_SECONDS": "2"])
        let socket = harness.daemon.adminSocket
        let drain = Thread.detachNewThreadWithResult {
            try? CommandOutput.run(TestPaths.binDirectory + "/afmctl", ["--socket", socket, "drain"])
        }
        #expect(waitUntil(seconds: 5) { (try? harness.client().get("/ready").status) == 503 })
        let started = try harness.daemon.afmctl(["listener", "start"])
        #expect(started.status == 0, "\(started.output)")
        let drained = drain.value
        #expect(drained?.status == 0, "\(drained?.output ?? "")")
        #expect(try harness.client().get("/ready").status == 200)
        let status = try JSONParser.parse(try harness.daemon.afmctl(["--json", "status"]).output)
        #expect(status["listener"]?["state"] == "running", "\(status)")
    }

    /// 50 requests at once against MaxConcurrent=2, MaxQueued=4: six are served (two at a time), the rest are
    /// refused at once with 503 busy and Retry-After; the gauges show the bound while it holds.
    @Test func admissionControlBoundsRunningAndQueuedRequests() throws {
        let harness = try DaemonHarness(
            models: ["slow": #"[{"delay_ms":1200},{"text":"done"}]"#],
            config: "[Backend.scripted]\nMaxConcurrent=2\nMaxQueued=4\n")
        let results = Mutex50()
        let group = DispatchGroup()
        let port = harness.port
        for index in 0..<50 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                let response = try? TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "slow"))
                results.set(index, response.map { ($0.status, $0.header("Retry-After"), $0.json?["error"]?["code"]?.stringValue) })
            }
        }
        // While the first two run: two running, four waiting.
        #expect(
            waitUntil(seconds: 10) {
                let text = (try? harness.client().get("/metrics").text) ?? ""
                return text.contains(#"afm_requests_running{backend="scripted"} 2"#)
                    && text.contains(#"afm_requests_waiting{backend="scripted"} 4"#)
            })
        group.wait()
        let all = results.values
        let served = all.filter { $0?.0 == 200 }
        let busy = all.filter { $0?.0 == 503 }
        #expect(served.count == 6, "\(all)")
        #expect(busy.count == 44)
        #expect(busy.allSatisfy { $0?.1 == "1" && $0?.2 == "busy" })
        let metrics = try harness.client().get("/metrics").text
        #expect(metrics.contains(#"afm_requests_total{dialect="responses",code="503"} 44"#))
        #expect(metrics.contains(#"afm_request_queue_seconds_count{model="slow",backend="scripted"} 6"#))
        // Two ran at once and waited for nothing; the other four waited at least one round (1.2 s) for a slot.
        #expect(metrics.contains(#"afm_request_queue_seconds_bucket{model="slow",backend="scripted",le="1"} 2"#), "\(metrics)")
    }

    @Test func servesOnAUnixSocket() throws {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let socket = TestPaths.makeTemporaryDirectory("afm-api") + "/api.sock"
        let root = TestPaths.makeTemporaryDirectory("afmd-root")
        let daemon = try DaemonProcess(
            backendDirectory: directory.path, config: "[Server]\nListen=unix:\(socket)\nListenSocketMode=0600\n", root: root,
            waitFor: "listening on unix:")
        var info = stat()
        #expect(stat(socket, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        let client = try TestHTTPClient(unixPath: socket)
        #expect(try client.get("/ready").status == 200)
        #expect(try client.post("/v1/responses", json: responsesBody(model: "scripted-demo")).status == 200)
        #expect(daemon.stop() == 0)
        #expect(stat(socket, &info) != 0)  // afmd removed the socket file it made
    }

    /// Socket activation as systemd does it (`systemd-socket-activate`, Debian's systemd package): the socket exists
    /// before afmd, a connection made before afmd starts is served, and afmd serves the passed descriptor.
    @Test func socketActivation() throws {
        let (activator, port, log) = try Self.activate(on: "127.0.0.1", config: "")
        defer { Self.end(activator) }
        // The socket listens before afmd runs: systemd-socket-activate starts afmd on the first connection.
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port)) != nil })
        let client = try TestHTTPClient(port: port)
        let ready = try client.get("/ready")
        #expect(ready.status == 200, "\(ready)")
        let text = Self.text(log)
        #expect(text.contains("listening on systemd"), "\(text)")
        #expect(try client.post("/v1/responses", json: responsesBody(model: "scripted-demo")).status == 200)
        kill(activator.processIdentifier, SIGTERM)
        activator.waitUntilExit()
        #expect(activator.terminationStatus == 0)
    }

    /// A socket systemd binds on a non-loopback address is under the same rule as `Listen=`: without API keys afmd
    /// refuses to serve it (before, the check looked only at `Listen=` and served 0.0.0.0 to anyone).
    @Test func socketActivationOnAPublicAddressNeedsKeys() throws {
        let (activator, port, log) = try Self.activate(on: "0.0.0.0", config: "")
        defer { Self.end(activator) }
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port)) != nil })
        let client = try TestHTTPClient(port: port)
        let answer = try? client.get("/v1/models")
        #expect(answer?.status != 200, "\(String(describing: answer))")
        #expect(waitUntil(seconds: 20) { !activator.isRunning })
        #expect(!activator.isRunning)
        if !activator.isRunning { #expect(activator.terminationStatus != 0) }
        let text = Self.text(log)
        #expect(text.contains("without API keys"), "\(text)")
    }

    /// The same rule on a reload: afmd serving a systemd socket on 0.0.0.0 with keys keeps them when a new
    /// configuration drops `APIKeyFile=` (before, the reload check skipped systemd sockets and turned keys off).
    @Test func socketActivationOnAPublicAddressKeepsKeysOnReload() throws {
        let keys = try Self.writeKeyFile(TestPaths.makeTemporaryDirectory("afm-keys"))
        let (activator, port, log) = try Self.activate(on: "0.0.0.0", config: "APIKeyFile=\(keys)\n")
        defer { Self.end(activator) }
        let root = (log as NSString).deletingLastPathComponent
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port)) != nil })
        #expect(try TestHTTPClient(port: port).get("/v1/models").status == 401)
        #expect(try TestHTTPClient(port: port).get("/v1/models", headers: ["x-api-key": Self.aliceKey]).status == 200)
        try "[Server]\nDrainDelaySeconds=0\n".write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        kill(activator.processIdentifier, SIGHUP)
        #expect(
            waitUntil(seconds: 10) {
                let text = Self.text(log)
                return text.contains("configuration reload") && (text.contains("reload failed") || text.contains("configuration reloaded"))
            })
        let text = Self.text(log)
        #expect(text.contains("without API keys"), "\(text)")
        #expect(try TestHTTPClient(port: port).get("/v1/models").status == 401)
        kill(activator.processIdentifier, SIGTERM)
        activator.waitUntilExit()
    }

    /// systemd's socket replaces `Listen`, so it is the socket that is judged: a config whose `Listen` is 0.0.0.0
    /// (for runs without systemd) does not stop afmd from serving a loopback socket without keys. Before, afmd
    /// refused to start ("refusing to listen on 0.0.0.0:0 without API keys") though it would never listen there.
    @Test func socketActivationIsJudgedByItsSocketNotByListen() throws {
        let (activator, port, log) = try Self.activate(on: "127.0.0.1", config: "Listen=0.0.0.0:0\n")
        defer { Self.end(activator) }
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port)) != nil })
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port, timeoutSeconds: 5).get("/ready").status) == 200 }, "\(Self.text(log))")
        kill(activator.processIdentifier, SIGTERM)
        activator.waitUntilExit()
        #expect(activator.terminationStatus == 0)
    }

    /// A systemd socket on 0.0.0.0 answers requests that name the machine by an IP address, as `Listen=0.0.0.0`
    /// does (a client or balancer reaching `http://10.1.2.3:PORT/`), also after a reload. Before, the browser
    /// checks took the socket for a loopback one and refused them 403 `forbidden_host`.
    @Test func socketActivationOnAPublicAddressAcceptsRequestsByIPAddress() throws {
        let root = TestPaths.makeTemporaryDirectory("afmd-keys")
        let keys = try Self.writeKeyFile(root)
        let (activator, port, log) = try Self.activate(on: "0.0.0.0", config: "APIKeyFile=\(keys)\n")
        defer { Self.end(activator) }
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port)) != nil })
        func byAddress() throws -> TestHTTPClient.Response {
            let client = try TestHTTPClient(port: port, timeoutSeconds: 10)
            try client.send("GET /v1/models HTTP/1.1\r\nHost: 10.1.2.3:\(port)\r\nx-api-key: \(Self.aliceKey)\r\n\r\n")
            return try client.readResponse()
        }
        let before = try byAddress()
        #expect(before.status == 200, "\(before.text.prefix(300))")
        kill(activator.processIdentifier, SIGHUP)
        #expect(waitUntil(seconds: 10) { Self.text(log).contains("configuration reloaded") }, "\(Self.text(log))")
        let after = try byAddress()
        #expect(after.status == 200, "\(after.text.prefix(300))")
        // A name is still refused (DNS rebinding).
        let client = try TestHTTPClient(port: port, timeoutSeconds: 10)
        try client.send("GET /v1/models HTTP/1.1\r\nHost: evil.example:\(port)\r\nx-api-key: \(Self.aliceKey)\r\n\r\n")
        #expect(try client.readResponse().status == 403)
    }

    /// afmd under `systemd-socket-activate -l HOST:PORT` (scripted backend, `DrainDelaySeconds=0` plus `config`
    /// lines in [Server]): the activator (which becomes afmd on the first connection), the port and the log file.
    static func activate(on host: String, config: String) throws -> (Process, Int, String) {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let port = try freePort()
        let root = TestPaths.makeTemporaryDirectory("afmd-root")
        try "[Server]\nDrainDelaySeconds=0\n\(config)".write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        let log = root + "/afmd.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let activator = Process()
        activator.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-socket-activate")
        activator.arguments = ["-l", "\(host):\(port)", TestPaths.afmd, "--config-root", root, "--backend-dir", directory.path]
        activator.standardError = FileHandle(forWritingAtPath: log)
        try activator.run()
        return (activator, port, log)
    }

    static func end(_ activator: Process) {
        if activator.isRunning {
            kill(activator.processIdentifier, SIGKILL)
            activator.waitUntilExit()
        }
    }

    static func text(_ log: String) -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }

    /// systemd keeps afmd.socket open and listening while afmd reloads, drains, stops and starts again; here the test
    /// plays systemd (it makes the socket and passes it to each afmd as descriptor 3). A reload keeps serving it, a
    /// drain and `afmctl listener start` serve it again, and a connection made while no afmd runs waits in its queue
    /// for the next one. Before: a reload closed the socket and listened on `Listen` instead, and closing the
    /// listener (drain, exit) shut the socket down for systemd too, so every later connection was refused.
    @Test func socketActivationKeepsSystemdsSocketThroughReloadDrainAndRestart() throws {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let root = TestPaths.makeTemporaryDirectory("afmd-root")
        try "[Server]\nDrainDelaySeconds=0\nListen=127.0.0.1:0\n".write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        let log = root + "/afmd.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
        try #require(bound == 0 && listen(listener, 16) == 0)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LISTEN_") }.map { "\($0.key)=\($0.value)" }
        // LISTEN_PID is afmd's own pid: the shell's, which exec keeps.
        func startDaemon() throws -> ChildProcess {
            try ChildProcess.spawn(
                path: "/bin/sh",
                arguments: [
                    "-c", #"LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" --config-root "$1" --backend-dir "$2" 2>>"$3""#,
                    TestPaths.afmd, root, directory.path, log,
                ],
                environment: environment, channel: FileDescriptor(rawValue: listener))
        }
        func logText() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        func ready() -> Int? { try? TestHTTPClient(port: port, timeoutSeconds: 5).get("/ready").status }

        let first = try startDaemon()
        var firstExit: ChildExitStatus?
        defer {
            if firstExit == nil {
                first.killImmediately()
                _ = first.wait()
            }
        }
        #expect(waitUntil(seconds: 20) { ready() == 200 }, "\(logText())")
        first.send(signal: SIGHUP)
        #expect(waitUntil(seconds: 10) { logText().contains("configuration reloaded") }, "\(logText())")
        #expect(ready() == 200, "after a reload: \(logText())")

        let socketPath = root + "/run/afm/admin.sock"
        let drained = try CommandOutput.run(TestPaths.binDirectory + "/afmctl", ["--socket", socketPath, "drain"])
        #expect(drained.status == 0, "\(drained.output)")
        let started = try CommandOutput.run(TestPaths.binDirectory + "/afmctl", ["--socket", socketPath, "listener", "start"])
        #expect(started.status == 0, "\(started.output)")
        #expect(ready() == 200, "after a drain and listener start: \(logText())")

        first.send(signal: SIGTERM)
        firstExit = first.wait()
        #expect(firstExit == .exited(0))
        // No afmd runs: the connection waits in systemd's queue, and the next afmd answers it.
        let waiting = try TestHTTPClient(port: port, timeoutSeconds: 20)
        let second = try startDaemon()
        var secondExit: ChildExitStatus?
        defer {
            if secondExit == nil {
                second.killImmediately()
                _ = second.wait()
            }
        }
        #expect(try waiting.get("/ready").status == 200, "\(logText())")
        second.send(signal: SIGTERM)
        secondExit = second.wait()
        #expect(secondExit == .exited(0))
    }

    /// `make run` ergonomics: afmctl run anywhere inside a checkout finds the admin socket of the daemon `make run`
    /// started there (`--config-root .build/afm/root`) without flags, when the standard socket is missing.
    @Test func afmctlFindsTheMakeRunDaemonOfItsCheckout() throws {
        let checkout = TestPaths.makeTemporaryDirectory("afm-checkout")
        let root = checkout + "/.build/afm/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: checkout + "/Sources/afmd", withIntermediateDirectories: true)
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let daemon = try DaemonProcess(backendDirectory: directory.path, root: root)
        let ctl = Process()
        ctl.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        ctl.arguments = ["--json", "status"]
        ctl.currentDirectoryURL = URL(fileURLWithPath: checkout + "/Sources/afmd")
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "AFM_ADMIN_SOCKET")
        environment.removeValue(forKey: "RUNTIME_DIRECTORY")
        environment["XDG_RUNTIME_DIR"] = TestPaths.makeTemporaryDirectory("afm-xdg")
        ctl.environment = environment
        let pipe = Pipe()
        ctl.standardOutput = pipe
        try ctl.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        ctl.waitUntilExit()
        #expect(ctl.terminationStatus == 0)
        #expect(try JSONParser.parse(Array(output))["pid"]?.numberValue?.intValue == Int(daemon.process.processIdentifier))
        #expect(daemon.stop() == 0)
    }

    /// The same under a umask of 002 (Debian's user-private-group scheme): the checkout's directories are writable by
    /// the owner's own group, which no one else is in, so the socket is still the caller's. Before, any group write
    /// bit made afmctl ignore the checkout's socket since the check against planted sockets (SharedRuntimeDirectoryTests).
    @Test func afmctlFindsTheMakeRunDaemonOfAGroupWritableCheckout() throws {
        let checkout = TestPaths.makeTemporaryDirectory("afm-checkout")
        let root = checkout + "/.build/afm/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let daemon = try DaemonProcess(backendDirectory: directory.path, root: root)
        // The test runs as root, whose group root has no other member: its private group.
        for path in [checkout + "/.build", checkout + "/.build/afm", root, root + "/run"] {
            #expect(chown(path, geteuid(), getegid()) == 0 && chmod(path, 0o775) == 0, "\(path)")
        }
        let ctl = Process()
        ctl.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        ctl.arguments = ["--json", "status"]
        ctl.currentDirectoryURL = URL(fileURLWithPath: checkout)
        var environment = ProcessInfo.processInfo.environment
        environment.removeValue(forKey: "AFM_ADMIN_SOCKET")
        environment.removeValue(forKey: "RUNTIME_DIRECTORY")
        environment["XDG_RUNTIME_DIR"] = TestPaths.makeTemporaryDirectory("afm-xdg")
        ctl.environment = environment
        let pipe = Pipe()
        ctl.standardOutput = pipe
        try ctl.run()
        let output = pipe.fileHandleForReading.readDataToEndOfFile()
        ctl.waitUntilExit()
        #expect(ctl.terminationStatus == 0, "\(String(decoding: output, as: UTF8.self))")
        #expect((try? JSONParser.parse(Array(output)))?["pid"]?.numberValue?.intValue == Int(daemon.process.processIdentifier))
        #expect(daemon.stop() == 0)
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Results of the admission test's threads, by index.
private final class Mutex50: @unchecked Sendable {
    // Safety: every access holds `lock`.
    private let lock = NSLock()
    private var storage = [(Int, String?, String?)?](repeating: nil, count: 50)
    func set(_ index: Int, _ value: (Int, String?, String?)?) { lock.withLock { storage[index] = value } }
    var values: [(Int, String?, String?)?] { lock.withLock { storage } }
}

extension Thread {
    /// Runs `body` on a new thread; `value` waits for its result.
    static func detachNewThreadWithResult<T>(_ body: @escaping @Sendable () -> T) -> ThreadResult<T> {
        let result = ThreadResult<T>()
        Thread.detachNewThread { result.set(body()) }
        return result
    }
}

final class ThreadResult<T>: @unchecked Sendable {
    // Safety: `stored` is written once before the semaphore is signalled and read only after waiting on it.
    private var stored: T?
    private let done = DispatchSemaphore(value: 0)
    func set(_ value: T) {
        stored = value
        done.signal()
    }
    var value: T {
        done.wait()
        done.signal()
        // The force unwrap is safe: the semaphore is signalled only after `stored` was set.
        return stored!
    }
}
