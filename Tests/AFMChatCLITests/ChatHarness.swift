// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation

/// A real afmd with the scripted backend serving `models` (id → model JSON without the id), and paths for `afm`.
struct ChatHarness {
    let daemon: DaemonProcess
    let scratch: String
    let record: String
    let dataDirectory: String
    /// Removes the backend and scratch directories when the harness goes.
    private let owned: [TemporaryDirectory]
    var url: String { "http://127.0.0.1:\(daemon.port)" }
    static var afm: String { TestPaths.binDirectory + "/afm" }

    init(models: [String: String]) throws {
        let backends = BackendDirectoryBuilder()
        try backends.addScripted()
        scratch = TestPaths.makeTemporaryDirectory("afm-chat-cli")
        owned = [TemporaryDirectory(adopting: backends.path), TemporaryDirectory(adopting: scratch)]
        record = scratch + "/record.jsonl"
        dataDirectory = scratch + "/data"
        let entries = models.sorted { $0.key < $1.key }.map { #"{"id":"\#($0.key)","# + $0.value.dropFirst() }
        let script = #"{"script_version":1,"models":[\#(entries.joined(separator: ","))]}"#
        try script.write(toFile: scratch + "/script.json", atomically: true, encoding: .utf8)
        daemon = try DaemonProcess(
            backendDirectory: backends.path, config: "[Backend.scripted]\nScript=\(scratch)/script.json\nRecordFile=\(record)\n")
    }

    /// Lines of the scripted backend's record file with this `event`.
    func records(_ event: String) -> [String] {
        ((try? String(contentsOfFile: record, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            .filter { $0.contains(#""event":"\#(event)""#) }
    }
}
