// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation

/// A real afmd with the real scripted backend and a script written for the test.
struct DaemonHarness {
    let directory = BackendDirectoryBuilder()
    let daemon: DaemonProcess
    let record: String
    /// A scratch directory of the test (the script lives here).
    let scratch: String
    /// Removes the backend and scratch directories when the harness goes.
    private let owned: [TemporaryDirectory]
    var port: Int { daemon.port }

    /// Starts afmd serving `models` (id → steps JSON) through the scripted backend, plus the plain C fixture.
    init(
        models: [String: String] = [:], config: String = "", withCFixture: Bool = false, environment: [String: String] = [:],
        nice: Int? = nil
    ) throws {
        try directory.addScripted()
        if withCFixture { try directory.addCFixture() }
        let scratch = TestPaths.makeTemporaryDirectory("afm-daemon-test")
        self.scratch = scratch
        owned = [TemporaryDirectory(adopting: directory.path), TemporaryDirectory(adopting: scratch)]
        record = scratch + "/record.jsonl"
        var settings = "[Backend.scripted]\nRecordFile=\(record)\n"
        if !models.isEmpty {
            // A model is either a steps array, or an object with "steps" and any other model fields.
            let entries = models.sorted { $0.key < $1.key }.map { id, definition in
                if definition.hasPrefix("{") {
                    var prefix = #"{"id":"\#(id)","#
                    if !definition.contains(#""context_tokens""#) { prefix += #""context_tokens":4096,"# }
                    if !definition.contains(#""capabilities""#) {
                        prefix += #""capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":false},"#
                    }
                    return prefix + definition.dropFirst()
                }
                return #"{"id":"\#(id)","context_tokens":4096,"capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":false},"steps":\#(definition)}"#
            }
            let script = #"{"script_version":1,"models":[\#(entries.joined(separator: ","))]}"#
            try script.write(toFile: scratch + "/script.json", atomically: true, encoding: .utf8)
            settings += "Script=\(scratch)/script.json\n"
        }
        daemon = try DaemonProcess(backendDirectory: directory.path, config: settings + config, environment: environment, nice: nice)
    }

    func client() throws -> TestHTTPClient { try TestHTTPClient(port: port) }

    /// Records the scripted backend wrote so far, parsed.
    func records() -> [JSONValue] {
        let text = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }
}

func responsesBody(model: String, input: String = "hello", stream: Bool = false, extra: String = "") -> String {
    #"{"model":"\#(model)","input":"\#(input)","stream":\#(stream)\#(extra)}"#
}

func nowUnixNanoseconds() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
}
