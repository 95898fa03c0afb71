// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The local backend's prompt cache through afmd (issue 18): the disk tier across a daemon restart, what `/status`
/// and `afmctl top` show, and a model swap with a cache present. The RAM tier, damaged entries and the memory bound
/// are covered by the backend's own tests (Plugins/local/tests/unit_tests.cpp, `prompt_cache_*`).
@Suite struct PromptCacheTests {
    /// A conversation of about 250 tokens about `topic`, ending in a user turn (the Responses API's input array).
    static func conversation(_ topic: String) -> String {
        var items: [String] = []
        for turn in 0..<4 {
            items.append(#"{"role":"user","content":"Tell me something about \#(topic), part \#(turn), in two short sentences please."}"#)
            items.append(
                #"{"role":"assistant","content":"Here is part \#(turn) about \#(topic): it is well known and often discussed. Many people find it interesting."}"#)
        }
        items.append(#"{"role":"user","content":"Summarise \#(topic) in one line."}"#)
        return "[" + items.joined(separator: ",") + "]"
    }

    struct Answer {
        var text: String
        var input: Int
        var cached: Int
    }

    func ask(_ local: LocalDaemon, model: String = "on-device", _ input: String) throws -> Answer {
        let response = try local.client().post(
            "/v1/responses", json: #"{"model":"\#(model)","input":\#(input),"max_output_tokens":12,"temperature":0}"#)
        #expect(response.status == 200, "\(response.text.prefix(600))")
        let json = try #require(response.json)
        let text = json["output"]?.arrayValue?.flatMap { $0["content"]?.arrayValue ?? [] }
            .compactMap { $0["text"]?.stringValue }.joined() ?? ""
        return Answer(
            text: text, input: json["usage"]?["input_tokens"]?.numberValue?.intValue ?? 0,
            cached: json["usage"]?["input_tokens_details"]?["cached_tokens"]?.numberValue?.intValue ?? -1)
    }

    /// The backend's `prompt_cache` figures in `/status` once `condition` holds (afmd refreshes them every 5 s).
    func cacheFigures(_ local: LocalDaemon, _ condition: (JSONValue) -> Bool) throws -> JSONValue {
        var figures: JSONValue = .null
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            figures = (try? local.status()?["prompt_cache"]) ?? .null
            if condition(figures) { return figures }
            usleep(200_000)
        }
        Issue.record("/status never showed the expected prompt cache figures: \(figures.jsonString)")
        return figures
    }

    /// The text of a GET on afmd's API port.
    func text(_ local: LocalDaemon, _ path: String) throws -> String {
        let response = try local.client().get(path)
        #expect(response.status == 200, "GET \(path): \(response.status)")
        return response.text
    }

    func count(_ figures: JSONValue, _ key: String) -> Int { figures[key]?.numberValue?.intValue ?? -1 }

    /// The first line `afmctl --json top` prints (it streams until stopped).
    func topSnapshot(_ local: LocalDaemon) throws -> JSONValue {
        let top = Process()
        top.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        top.arguments = ["--socket", local.daemon.adminSocket, "--json", "top", "--interval", "200"]
        let pipe = Pipe()
        top.standardOutput = pipe
        try SignalState.withBlocked([SIGTERM]) { try top.run() }
        var text = ""
        while !text.contains("\n") {
            let data = pipe.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        #expect(top.terminateGracefully(within: 2), "afmctl top ignored SIGTERM for 2 s")
        return try JSONParser.parse(String(text.split(separator: "\n").first ?? ""))
    }

    @Test func aConversationComesBackFromTheDiskTierAfterADaemonRestart() throws {
        let directory = TestPaths.makeTemporaryDirectory("prompt-cache")
        let settings = "ParallelSequences=1\nPromptCacheDir=\(directory)\n"
        let conversation = Self.conversation("rivers")

        let before = try LocalDaemon(settings: settings)
        let first = try ask(before, conversation)
        #expect(first.cached == 0 && first.input > 200, "\(first)")
        #expect(!first.text.isEmpty)
        // Written in the background after the answer; /status shows the entry.
        let written = try cacheFigures(before) { count($0, "disk_entries") >= 1 }
        #expect(count(written, "disk_writes") >= 1, "\(written.jsonString)")
        #expect(written["directory"]?.stringValue?.hasPrefix(directory) == true, "\(written.jsonString)")
        #expect(before.daemon.stop() == 0)

        // A new afmd process: its slot is empty, the disk tier has the conversation.
        let after = try LocalDaemon(settings: settings)
        let second = try ask(after, conversation)
        #expect(second.cached >= second.input - 1 && second.cached > 0, "not restored from disk: \(second)")
        #expect(second.text == first.text, "\(second.text.debugDescription) vs \(first.text.debugDescription)")
        let figures = try cacheFigures(after) { count($0, "disk_hits") == 1 }
        #expect(count(figures, "hits") == 1 && count(figures, "misses") == 0, "\(figures.jsonString)")
        #expect(count(figures, "ram_limit_bytes") == 2048 << 20, "\(figures.jsonString)")

        // /metrics exports them as afm_prompt_cache_* families (with HELP and TYPE), per tier.
        let metrics = try text(after, "/metrics")
        for family in [
            "afm_prompt_cache_bytes gauge", "afm_prompt_cache_entries gauge", "afm_prompt_cache_limit_bytes gauge",
            "afm_prompt_cache_hits_total counter", "afm_prompt_cache_misses_total counter",
            "afm_prompt_cache_evictions_total counter", "afm_prompt_cache_restored_tokens_total counter",
            "afm_prompt_cache_discarded_total counter",
        ] {
            #expect(metrics.contains("# TYPE \(family)\n"), "no \(family) in /metrics")
            #expect(metrics.contains("# HELP \(family.split(separator: " ")[0]) "), "no HELP for \(family)")
        }
        let expected = [
            #"afm_prompt_cache_hits_total{backend="local",tier="disk"} 1"#,
            #"afm_prompt_cache_hits_total{backend="local",tier="ram"} 0"#,
            #"afm_prompt_cache_misses_total{backend="local"} 0"#,
            #"afm_prompt_cache_limit_bytes{backend="local",tier="ram"} 2147483648"#,
            #"afm_prompt_cache_limit_bytes{backend="local",tier="disk"} 8589934592"#,
            #"afm_prompt_cache_restored_tokens_total{backend="local"} \#(count(figures, "restored_tokens"))"#,
        ]
        for line in expected { #expect(metrics.contains(line + "\n"), "/metrics lacks \(line)") }

        // afmctl top shows the same figures, with the backend's id.
        let snapshot = try topSnapshot(after)
        let cache = try #require(snapshot["prompt_cache"]?.arrayValue?.first, "\(snapshot.jsonString)")
        #expect(cache["backend"] == "local")
        #expect(count(cache, "disk_hits") == 1, "\(cache.jsonString)")
        print("prompt cache after a restart: \(second.cached) of \(second.input) input tokens restored from disk; \(figures.jsonString)")
    }

    @Test func aModelSwapNeverServesTheOtherModelsEntriesAndTheSameModelFindsItsOwnAgain() throws {
        let gemma = ModelSwapTests.gemmaModel
        guard FileManager.default.fileExists(atPath: gemma) else {
            throw LocalDaemon.Failure(description: "\(gemma) is missing: run `scripts/fetch-model gemma3-270m` (or `make model-gemma`)")
        }
        let directory = TestPaths.makeTemporaryDirectory("prompt-cache")
        let local = try LocalDaemon(settings: "ParallelSequences=1\nPromptCacheDir=\(directory)\n")
        let conversation = Self.conversation("lighthouses")
        let smol = try ask(local, conversation)
        #expect(smol.cached == 0 && !smol.text.isEmpty, "\(smol)")
        let smolFigures = try cacheFigures(local) { count($0, "disk_entries") >= 1 }
        let smolDirectory = try #require(smolFigures["directory"]?.stringValue)

        func reload(to model: String?) throws {
            let dropIns = local.daemon.root + "/etc/afm/afmd.conf.d"
            try FileManager.default.createDirectory(atPath: dropIns, withIntermediateDirectories: true)
            if let model {
                try "[Backend.local]\nModel=\(model)\n".write(toFile: dropIns + "/50-model.conf", atomically: true, encoding: .utf8)
            } else {
                try FileManager.default.removeItem(atPath: dropIns + "/50-model.conf")
            }
            let reload = try local.daemon.afmctl(["--json", "reload", "--wait"])
            #expect(reload.status == 0, "afmctl reload: \(reload.output) \(reload.errors)")
        }

        // Gemma with the SmolLM2 entry on disk: its own directory, nothing restored, a real answer.
        try reload(to: gemma)
        let other = try ask(local, model: ModelSwapTests.gemmaID, conversation)
        #expect(other.cached == 0, "another model's entry was served: \(other)")
        #expect(!other.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "\(other)")
        let gemmaFigures = try cacheFigures(local) { count($0, "disk_entries") >= 1 && $0["directory"]?.stringValue != smolDirectory }
        #expect(count(gemmaFigures, "disk_hits") == 0 && count(gemmaFigures, "hits") == 0, "\(gemmaFigures.jsonString)")
        let directories = try FileManager.default.contentsOfDirectory(atPath: directory)
        #expect(directories.count == 2, "\(directories)")

        // Back to SmolLM2 (a reload of the same model): its entry is restored, the answer is the same.
        try reload(to: nil)
        let back = try ask(local, conversation)
        #expect(back.cached >= back.input - 1 && back.cached > 0, "not restored after the reload: \(back)")
        #expect(back.text == smol.text, "\(back.text.debugDescription) vs \(smol.text.debugDescription)")
        print("model swap with a prompt cache: SmolLM2 \(smol.input) tokens, Gemma cached \(other.cached), SmolLM2 again cached \(back.cached)")
    }
}
