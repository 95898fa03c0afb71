// SPDX-License-Identifier: Apache-2.0
import AFMJSON
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
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let port = try Self.freePort()
        let root = TestPaths.makeTemporaryDirectory("afmd-root")
        try "[Server]\nDrainDelaySeconds=0\n".write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        let log = root + "/afmd.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let activator = Process()
        activator.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-socket-activate")
        activator.arguments = [
            "-l", "127.0.0.1:\(port)", TestPaths.afmd, "--config-root", root, "--backend-dir", directory.path,
        ]
        activator.standardError = FileHandle(forWritingAtPath: log)
        try activator.run()
        defer {
            if activator.isRunning {
                kill(activator.processIdentifier, SIGKILL)
                activator.waitUntilExit()
            }
        }
        // The socket listens before afmd runs: systemd-socket-activate starts afmd on the first connection.
        #expect(waitUntil(seconds: 10) { (try? TestHTTPClient(port: port)) != nil })
        let client = try TestHTTPClient(port: port)
        let ready = try client.get("/ready")
        #expect(ready.status == 200, "\(ready)")
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(text.contains("listening on systemd"), "\(text)")
        #expect(try client.post("/v1/responses", json: responsesBody(model: "scripted-demo")).status == 200)
        kill(activator.processIdentifier, SIGTERM)
        activator.waitUntilExit()
        #expect(activator.terminationStatus == 0)
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
