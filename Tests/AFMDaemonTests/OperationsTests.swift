// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Operating a real afmd through afmctl and signals: status, prompt, config origins, listener, token monitor,
/// hot reload of libraries and settings under load, sd_notify.
@Suite struct OperationsTests {
    func status(_ harness: DaemonHarness) throws -> JSONValue {
        let result = try harness.daemon.afmctl(["--json", "status"])
        #expect(result.status == 0, "\(result.errors)")
        return try JSONParser.parse(result.output)
    }

    @Test func afmctlReadsAndChangesTheDaemon() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let human = try harness.daemon.afmctl(["status"])
        #expect(human.status == 0)
        #expect(human.output.contains("scripted"))
        let backends = try harness.daemon.afmctl(["backends"])
        #expect(backends.output.contains("scripted") && backends.output.contains("ready"))

        #expect(try harness.daemon.afmctl(["prompt", "set", "Be nice."]).status == 0)
        #expect(try harness.daemon.afmctl(["prompt", "get"]).output.contains("Be nice."))
        _ = try harness.client().post("/v1/responses", json: responsesBody(model: "m"))
        let generate = harness.records().last { $0["event"] == "generate" }
        #expect(generate?["request"]?["system"] == ["Be nice."])

        let origin = try harness.daemon.afmctl(["config", "show", "--origin", "Server.Listen"])
        #expect(origin.status == 0)
        #expect(origin.output.contains("--listen"))

        let refused = try harness.daemon.afmctl(["settings", "set", "port", "99999"])
        #expect(refused.status != 0)
        #expect(refused.errors.contains("port"))
    }

    /// Text afmctl did not write (a prompt, a value echoed in an error) is printed with its control characters
    /// escaped: no ESC reaches the terminal, and no newline starts a line of its own in a one-line field.
    @Test func afmctlEscapesControlCharactersInReplies() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let prompt = "Be nice.\n\tSecond line \u{1B}]0;pwned\u{07}\u{1B}[2J\u{9B}31m end"
        #expect(try harness.daemon.afmctl(["prompt", "set", prompt]).status == 0)
        let get = try harness.daemon.afmctl(["prompt", "get"])
        #expect(get.output == "Be nice.\n\tSecond line \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m end\n")
        #expect(try harness.daemon.afmctl(["reload"]).status == 0)  // config show reports the loaded configuration
        let show = try harness.daemon.afmctl(["config", "show", "Responses.CommonPrompt"])
        #expect(show.output == "Responses.CommonPrompt=Be nice.\\n\\tSecond line \\x1b]0;pwned\\x07\\x1b[2J\\x9b31m end\n")
        let json = try harness.daemon.afmctl(["--json", "prompt", "get"])
        #expect(!json.output.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x9B })
        #expect(try JSONParser.parse(json.output)["text"]?.stringValue == prompt)
        let refused = try harness.daemon.afmctl(["settings", "set", "host", "bad\u{1B}[2J\nforged"])
        #expect(refused.status == 65)
        #expect(!refused.errors.unicodeScalars.contains { $0.value == 0x1B })
        #expect(refused.errors.split(separator: "\n").count == 1, "\(refused.errors)")
    }

    /// A hand edit of the control file, then `afmctl reload`: the next `settings set` keeps the edit (it used to
    /// rewrite the file from the store's stale copy), and `prompt get` shows the file's revision.
    @Test func aHandEditOfTheControlFileSurvivesReloadAndTheNextSet() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        #expect(try harness.daemon.afmctl(["settings", "set", "privateCloudPreference", "yes"]).status == 0)
        let control = harness.daemon.root + "/var/lib/afm/control.json"
        try #"{"schema":"AFM.serverSettings.v1","version":1,"revision":7,"privateCloudPreference":true,"commonPrompt":"By hand."}"#
            .write(toFile: control, atomically: true, encoding: .utf8)
        let reload = try harness.daemon.afmctl(["reload"])
        #expect(reload.status == 0, "\(reload.errors)")
        let prompt = try JSONParser.parse(try harness.daemon.afmctl(["--json", "prompt", "get"]).output)
        #expect(prompt["text"] == "By hand.")
        #expect(prompt["revision"]?.numberValue?.intValue == 7)
        let set = try harness.daemon.afmctl(["settings", "set", "privateCloudPreference", "no"])
        #expect(set.status == 0, "\(set.errors)")
        let file = try JSONParser.parse(try String(contentsOfFile: control, encoding: .utf8))
        #expect(file["commonPrompt"] == "By hand.")
        #expect(file["privateCloudPreference"] == false)
        #expect(file["revision"]?.numberValue?.intValue == 8)
        #expect(try harness.daemon.afmctl(["prompt", "get"]).output == "By hand.\n")
    }

    /// A hand-edited revision at `Int.max` used to abort afmd on the next `settings set` (`revision += 1`
    /// trapped). Now the edit is refused as a corrupt file, the file is kept, and the daemon keeps serving.
    @Test func anOutOfRangeRevisionIsRefusedAndTheDaemonSurvives() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        #expect(try harness.daemon.afmctl(["prompt", "set", "A"]).status == 0)
        let control = harness.daemon.root + "/var/lib/afm/control.json"
        let text = #"{"schema":"AFM.serverSettings.v1","version":1,"revision":9223372036854775807,"commonPrompt":"B"}"#
        try text.write(toFile: control, atomically: true, encoding: .utf8)
        let set = try harness.daemon.afmctl(["settings", "set", "port", "8080"])
        #expect(set.status != 0)
        #expect(set.errors.contains("revision"), "\(set.errors)")
        let prompt = try harness.daemon.afmctl(["prompt", "set", "C"])
        #expect(prompt.status != 0)
        #expect(try String(contentsOfFile: control, encoding: .utf8) == text)
        #expect(try status(harness)["listener"]?["state"] == "running")
        #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "m")).status == 200)
    }

    /// GetPrompt never pairs one prompt's text with another's revision. A hand edit (rev 7, prompt "B") without
    /// a reload, then an unrelated `settings set` (rev 8, still "B"): the daemon applies the whole re-read file,
    /// so `prompt get` shows "B" at 8, and the prompt in force is "B" too; `--if-revision 8` then replaces what
    /// the caller saw, and a stale revision is refused.
    @Test func getPromptPairsTheTextWithItsRevision() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        #expect(try harness.daemon.afmctl(["prompt", "set", "A"]).status == 0)
        let control = harness.daemon.root + "/var/lib/afm/control.json"
        try #"{"schema":"AFM.serverSettings.v1","version":1,"revision":7,"commonPrompt":"B"}"#
            .write(toFile: control, atomically: true, encoding: .utf8)
        let set = try harness.daemon.afmctl(["settings", "set", "privateCloudPreference", "no"])
        #expect(set.status == 0, "\(set.errors)")
        let prompt = try JSONParser.parse(try harness.daemon.afmctl(["--json", "prompt", "get"]).output)
        #expect(prompt["text"] == "B")
        #expect(prompt["revision"]?.numberValue?.intValue == 8)
        _ = try harness.client().post("/v1/responses", json: responsesBody(model: "m"))
        let generate = harness.records().last { $0["event"] == "generate" }
        #expect(generate?["request"]?["system"] == ["B"])
        #expect(try harness.daemon.afmctl(["prompt", "set", "--if-revision", "7", "A2"]).status != 0)
        #expect(try harness.daemon.afmctl(["prompt", "set", "--if-revision", "8", "B2"]).status == 0)
        #expect(try harness.daemon.afmctl(["prompt", "get"]).output == "B2\n")
    }

    /// Bidirectional controls in a prompt are escaped by `afmctl prompt get` like the other controls.
    @Test func afmctlEscapesBidiControls() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        #expect(try harness.daemon.afmctl(["prompt", "set", "a\u{202E}b\u{2066}c"]).status == 0)
        let get = try harness.daemon.afmctl(["prompt", "get"])
        #expect(get.output == "a\\u202eb\\u2066c\n")
        #expect(!get.output.unicodeScalars.contains { $0.value == 0x202E || $0.value == 0x2066 })
    }

    @Test func listenerStopClosesEverySocketAndStartReopens() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let idle = try harness.client()
        #expect(try idle.get("/health").status == 200)
        let stop = try harness.daemon.afmctl(["listener", "stop"])
        #expect(stop.status == 0, "\(stop.errors)")
        #expect(idle.serverClosed())
        #expect((try? TestHTTPClient(port: harness.port, timeoutSeconds: 1)) == nil)
        #expect(try status(harness)["listener"]?["state"] == "stopped")

        #expect(try harness.daemon.afmctl(["listener", "start"]).status == 0)
        let document = try status(harness)
        #expect(document["listener"]?["state"] == "running")
        let address = try #require(document["listen"]?.stringValue)
        let port = try #require(Int(address.split(separator: ":").last ?? ""))
        #expect(try TestHTTPClient(port: port).get("/health").status == 200)
    }

    @Test func theTokenMonitorCountsWhatGenerated() throws {
        let usage = #"{"usage":{"input_tokens":5,"output_tokens":2,"reasoning_tokens":1,"cached_tokens":3}}"#
        let harness = try DaemonHarness(models: [
            "ok": #"[{"text":"a"},{"text":"b"},\#(usage)]"#,
            "fails": #"[{"text":"a"},\#(usage),{"error":{"code":"internal","message":"x"}}]"#,
        ])
        let client = try harness.client()
        for _ in 0..<3 { #expect(try client.post("/v1/responses", json: responsesBody(model: "ok")).status == 200) }
        _ = try client.post("/v1/responses", json: responsesBody(model: "fails", stream: true))
        // Refused before generation: not counted.
        #expect(try client.post("/v1/responses", json: responsesBody(model: "nope")).status == 404)
        #expect(try client.post("/v1/responses", json: #"{"model":"ok"}"#).status == 400)

        let totals = try #require(try status(harness)["tokens"])
        #expect(totals["requests"] == 4)
        #expect(totals["input_tokens"] == 20)
        #expect(totals["output_tokens"] == 8)
        #expect(totals["reasoning_tokens"] == 4)
        #expect(totals["cached_tokens"] == 12)

        // The live monitor streams the same figures; stopping the listener keeps them.
        #expect(try harness.daemon.afmctl(["listener", "stop"]).status == 0)
        let top = Process()
        top.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        top.arguments = ["--socket", harness.daemon.adminSocket, "--json", "top", "--interval", "200"]
        let pipe = Pipe()
        top.standardOutput = pipe
        // Started from a thread that blocks signals, as the test runner's dispatch workers do: afmctl must not keep
        // that mask. It blocks exactly the two its signal thread takes with sigwait.
        try SignalState.withBlocked([SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1]) { try top.run() }
        let line = try #require(String(decoding: pipe.fileHandleForReading.availableDataLine(), as: UTF8.self).split(separator: "\n").first)
        let mask = try #require(SignalState.blocked(in: top.processIdentifier))
        #expect(mask == SignalState.mask([SIGTERM, SIGINT]), "afmctl top blocks \(String(mask, radix: 16))")
        // SIGTERM stops the monitor promptly, and that is a normal end (status 0), as for procps top.
        #expect(top.terminateGracefully(within: 2), "afmctl top ignored SIGTERM for 2 s")
        #expect(top.terminationReason == .exit && top.terminationStatus == 0, "\(top.terminationReason) \(top.terminationStatus)")
        let snapshot = try JSONParser.parse(String(line))
        #expect(snapshot["totals"]?["requests"] == 4)
        #expect(snapshot["totals"]?["requests_by_dialect"] == ["responses": 4, "chat_completions": 0, "messages": 0])
        #expect(snapshot["last_updated"]?["dialect"] == "responses")
        #expect(snapshot["last_updated"]?["model"] == "fails")
        #expect(snapshot["last_updated"]?["state"] == "failed")
    }

    @Test func reloadSwapsTheLibraryWhileAStreamIsInFlight() throws {
        let harness = try DaemonHarness(models: ["slow": #"[{"repeat":30,"steps":[{"text":"s"},{"delay_ms":30}]}]"#])
        let streaming = try harness.client()
        try streaming.sendRequest("POST", "/v1/responses", body: Array(responsesBody(model: "slow", stream: true).utf8))
        _ = try streaming.readUntil { $0.contains("response.output_text.delta") }

        // A different build of the library: the same plugin reporting version 2.0.0.
        let library = harness.directory.path + "/scripted.so"
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: library)))
        let old = Array("1.0.0".utf8)
        var patched = 0
        var index = 0
        while index + old.count <= bytes.count {
            if Array(bytes[index..<index + old.count]) == old {
                bytes.replaceSubrange(index..<index + old.count, with: Array("2.0.0".utf8))
                patched += 1
            }
            index += 1
        }
        #expect(patched > 0)
        try Data(bytes).write(to: URL(fileURLWithPath: library + ".new"))
        _ = rename(library + ".new", library)

        let reload = try harness.daemon.afmctl(["reload", "scripted"])
        #expect(reload.status == 0, "\(reload.errors)")
        let backend = try #require(try status(harness)["backends"]?[0])
        #expect(backend["version"] == "2.0.0")
        #expect(backend["generation"] == 2)

        // The stream finishes on generation 1; the next request is served by generation 2.
        let rest = try streaming.readUntil { $0.contains("response.completed") || $0.contains("response.failed") }
        #expect(rest.contains("response.completed"))
        #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "slow")).status == 200)
        #expect(waitUntil { (try? status(harness))?["backends"]?[0]?["draining"] == [] })
    }

    @Test func aBrokenLibraryOrScriptKeepsTheOldGeneration() throws {
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#])
        let library = harness.directory.path + "/scripted.so"
        let good = try Data(contentsOf: URL(fileURLWithPath: library))
        try Data("not an ELF file".utf8).write(to: URL(fileURLWithPath: library))
        let failed = try harness.daemon.afmctl(["reload", "scripted"])
        #expect(failed.status != 0)
        var backend = try #require(try status(harness)["backends"]?[0])
        #expect(backend["state"] == "ready")
        #expect(backend["generation"] == 1)
        #expect(backend["reason"]?.stringValue?.contains("last reload failed") == true)
        #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "m")).status == 200)

        // A bad setting through a drop-in and SIGHUP: the reload of the changed backend fails, the old one serves.
        try good.write(to: URL(fileURLWithPath: library))
        let dropIns = harness.daemon.root + "/etc/afm/afmd.conf.d"
        try FileManager.default.createDirectory(atPath: dropIns, withIntermediateDirectories: true)
        try "[Backend.scripted]\nScript=/nonexistent/script.json\n".write(toFile: dropIns + "/50-bad.conf", atomically: true, encoding: .utf8)
        kill(harness.daemon.process.processIdentifier, SIGHUP)
        // The second such line: the first, of the broken library above, is in the log already (waiting for any
        // line raced the SIGHUP's reload, which failed this test under AddressSanitizer).
        let failures = { harness.daemon.log.components(separatedBy: "reload failed; the previous generation keeps serving").count - 1 }
        #expect(waitUntil { failures() >= 2 })
        backend = try #require(try status(harness)["backends"]?[0])
        #expect(backend["generation"] == 1)
        #expect(backend["reason"]?.stringValue?.contains("/nonexistent/script.json") == true)
        #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "m")).status == 200)
    }

    @Test func twentyReloadsWhileEightClientsStream() async throws {
        let harness = try DaemonHarness(models: ["m": #"[{"repeat":10,"steps":[{"text":"t"},{"delay_ms":10}]}]"#])
        let port = harness.port
        let stop = Flag()
        let results = Tally()
        let clients = (0..<8).map { _ in
            Thread {
                while !stop.isSet {
                    guard let client = try? TestHTTPClient(port: port),
                        let response = try? client.post("/v1/responses", json: responsesBody(model: "m", stream: true))
                    else {
                        results.add(failed: true)
                        continue
                    }
                    let ok = response.status == 200 && response.events.last?.event == "response.completed"
                    results.add(failed: !ok)
                }
            }
        }
        for client in clients { client.start() }
        var generations: [Int] = []
        for round in 0..<20 {
            // Alternate two kinds of reload: a changed setting through SIGHUP, and a forced reload via afmctl.
            if round.isMultiple(of: 2) {
                let dropIns = harness.daemon.root + "/etc/afm/afmd.conf.d"
                try FileManager.default.createDirectory(atPath: dropIns, withIntermediateDirectories: true)
                try "[Backend.scripted]\nVersion=round-\(round)\n".write(toFile: dropIns + "/60-version.conf", atomically: true, encoding: .utf8)
                let before = harness.daemon.log.components(separatedBy: "configuration reloaded").count
                kill(harness.daemon.process.processIdentifier, SIGHUP)
                #expect(waitUntil { harness.daemon.log.components(separatedBy: "configuration reloaded").count > before })
            } else {
                #expect(try harness.daemon.afmctl(["reload", "scripted"]).status == 0)
            }
            if let generation = (try? status(harness))?["backends"]?[0]?["generation"]?.numberValue?.intValue { generations.append(generation) }
            try await Task.sleep(for: .milliseconds(50))
        }
        stop.set()
        for _ in 0..<400 where clients.contains(where: { !$0.isFinished }) { try await Task.sleep(for: .milliseconds(25)) }
        #expect(results.failed == 0, "\(results.failed) failed of \(results.total)")
        #expect(results.total >= 40)
        #expect(generations.last == 21)
    }

    @Test func systemdIsNotifiedOfReadyReloadingAndStopping() throws {
        let socketPath = TestPaths.makeTemporaryDirectory("afm-notify") + "/notify.sock"
        let listener = try NotifySocket(path: socketPath)
        let harness = try DaemonHarness(models: ["m": #"[{"text":"ok"}]"#], environment: ["NOTIFY_SOCKET": socketPath])
        #expect(listener.receive()?.contains("READY=1") == true)
        kill(harness.daemon.process.processIdentifier, SIGHUP)
        #expect(listener.receive()?.contains("RELOADING=1") == true)
        #expect(listener.receive()?.contains("READY=1") == true)
        #expect(harness.daemon.stop() == 0)
        #expect(listener.receive()?.contains("STOPPING=1") == true)
    }
}

/// A stop flag shared with client threads.
final class Flag: @unchecked Sendable {
    // Safety: every access holds `lock`.
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

/// Counts outcomes from several threads.
final class Tally: @unchecked Sendable {
    // Safety: every access holds `lock`.
    private let lock = NSLock()
    private var counts = (total: 0, failed: 0)
    func add(failed: Bool) { lock.withLock { counts.total += 1; if failed { counts.failed += 1 } } }
    var total: Int { lock.withLock { counts.total } }
    var failed: Int { lock.withLock { counts.failed } }
}

extension FileHandle {
    /// Reads until a newline arrives (or EOF).
    func availableDataLine() -> Data {
        var data = Data()
        while !data.contains(10) {
            let chunk = availableData
            if chunk.isEmpty { break }
            data += chunk
        }
        return data
    }
}
