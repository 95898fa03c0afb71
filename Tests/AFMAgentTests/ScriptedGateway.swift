// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON
import AFMTestSupport
import Foundation

/// A real afmd serving the real scripted backend with a test's script, which records every generation request
/// it gets (the host's generation request document: tools offered, tool choice, input).
final class ScriptedGateway {
    let daemon: DaemonProcess
    let recordPath: String
    /// Removes the backend and script directories when the gateway goes.
    private let owned: [TemporaryDirectory]

    /// Starts afmd with one scripted model per entry of `models` (id → steps JSON), each with `contextTokens`
    /// (and `maxInputTokens`, when given); `capabilities` gives some models a capabilities object (JSON text,
    /// such as `{"vision":true}`).
    init(
        models: [(id: String, steps: String)], contextTokens: Int = 8192, maxInputTokens: Int? = nil,
        capabilities: [String: String] = [:]
    ) throws {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let root = TestPaths.makeTemporaryDirectory("afm-agent-script")
        owned = [TemporaryDirectory(adopting: directory.path), TemporaryDirectory(adopting: root)]
        let scriptPath = root + "/script.json"
        recordPath = root + "/records.jsonl"
        let input = maxInputTokens.map { #","max_input_tokens":\#($0)"# } ?? ""
        let entries = models.map { model in
            let declared = capabilities[model.id].map { #","capabilities":\#($0)"# } ?? ""
            return #"{"id":"\#(model.id)","context_tokens":\#(contextTokens)\#(input)\#(declared),"steps":\#(model.steps)}"#
        }
        try #"{"script_version":1,"models":[\#(entries.joined(separator: ","))]}"#.write(
            toFile: scriptPath, atomically: true, encoding: .utf8)
        daemon = try DaemonProcess(
            backendDirectory: directory.path, config: "[Backend.scripted]\nScript=\(scriptPath)\nRecordFile=\(recordPath)\n")
    }

    deinit { daemon.stop() }

    var url: ServerURL { ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: "") }

    /// The record file's text.
    var records: String { (try? String(contentsOfFile: recordPath, encoding: .utf8)) ?? "" }

    /// The generation request documents the backend accepted, in order (optionally only for one model).
    func requests(model: String? = nil) -> [JSONValue] {
        records.split(separator: "\n").compactMap { line -> JSONValue? in
            guard let record = try? JSONParser.parse(String(line)), record["event"] == "generate",
                record["accepted"] == true, let request = record["request"]
            else { return nil }
            if let model, request["model"]?.stringValue != model { return nil }
            return request
        }
    }
}

extension JSONValue {
    /// The names of the tools a generation request offered.
    var offeredTools: [String] { (self["tools"]?.arrayValue ?? []).compactMap { $0["name"]?.stringValue } }
    /// The mode of a generation request's tool choice (`auto`, `none`, `required`, `function`).
    var toolMode: String? { self["tool_choice"]?["mode"]?.stringValue }
    /// The `type` of every input item.
    var inputTypes: [String] { (self["input"]?.arrayValue ?? []).compactMap { $0["type"]?.stringValue } }
    /// The text of every user message in the input.
    var userTexts: [String] {
        (self["input"]?.arrayValue ?? []).filter { $0["role"] == "user" }.map { item in
            (item["content"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }.joined()
        }
    }
}
