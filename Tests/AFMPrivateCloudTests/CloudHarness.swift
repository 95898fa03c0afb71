// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Where the private-cloud plugin is in this build.
enum CloudPaths {
    static var library: String { TestPaths.binDirectory + "/libafm-backend-private-cloud.so" }
    static var manifest: String { TestPaths.root + "/Plugins/private-cloud/private-cloud.json" }
}

/// A real afmd hosting the real private-cloud plugin (configured by `[Backend.private-cloud]`) and, optionally,
/// the scripted backend with a script (for an afmd used as an upstream).
struct CloudDaemon {
    let directory = BackendDirectoryBuilder()
    private(set) var daemon: DaemonProcess
    let scratch: String
    let record: String
    /// Removes the backend and scratch directories when the harness goes.
    private let owned: [TemporaryDirectory]
    /// afmd.conf up to the `[Backend.private-cloud]` section.
    private let baseConfig: String
    var port: Int { daemon.port }
    var baseURL: String { "http://127.0.0.1:\(port)/v1" }

    /// - Parameters:
    ///   - cloud: the lines of `[Backend.private-cloud]` (nil: the plugin is not installed).
    ///   - scriptedModels: full scripted model objects (JSON); empty: the scripted demo.
    init(cloud: String?, scriptedModels: [String] = [], environment: [String: String] = [:]) throws {
        try directory.addScripted()
        if cloud != nil {
            try? FileManager.default.removeItem(atPath: directory.path + "/private-cloud.so")
            try FileManager.default.copyItem(atPath: CloudPaths.library, toPath: directory.path + "/private-cloud.so")
            try FileManager.default.copyItem(atPath: CloudPaths.manifest, toPath: directory.path + "/private-cloud.json")
        }
        scratch = TestPaths.makeTemporaryDirectory("afm-cloud-test")
        owned = [TemporaryDirectory(adopting: directory.path), TemporaryDirectory(adopting: scratch)]
        record = scratch + "/record.jsonl"
        var config = "[Backend.scripted]\nRecordFile=\(record)\n"
        if !scriptedModels.isEmpty {
            let script = #"{"script_version":1,"models":[\#(scriptedModels.joined(separator: ","))]}"#
            try script.write(toFile: scratch + "/script.json", atomically: true, encoding: .utf8)
            config += "Script=\(scratch)/script.json\n"
        }
        baseConfig = config
        if let cloud { config += "[Backend.private-cloud]\n\(cloud)\n" }
        daemon = try DaemonProcess(backendDirectory: directory.path, config: config, environment: environment)
    }

    /// Stops afmd (SIGTERM) and starts it again in the same config root, so its state directory (the quota
    /// database) is kept; `cloud` replaces the `[Backend.private-cloud]` lines.
    mutating func restart(cloud: String) throws {
        #expect(daemon.stop() == 0, "afmd did not stop cleanly")
        daemon = try DaemonProcess(
            backendDirectory: directory.path, config: baseConfig + "[Backend.private-cloud]\n\(cloud)\n",
            root: daemon.root)
    }

    /// The private cloud's quota database in this daemon's state directory.
    var quotaDatabase: String { daemon.root + "/var/lib/afm/backends/private-cloud/quota.sqlite3" }

    func client() throws -> TestHTTPClient { try TestHTTPClient(port: port, timeoutSeconds: 120) }

    /// POSTs a Responses request and returns the response.
    func respond(_ body: String) throws -> TestHTTPClient.Response {
        try client().post("/v1/responses", json: body)
    }

    /// The scripted backend's records, parsed.
    func records() -> [JSONValue] {
        let text = (try? String(contentsOfFile: record, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
    }

    /// `/status`'s entry for a backend.
    func status(_ id: String = "private-cloud") throws -> JSONValue? {
        try client().get("/status").json?["backends"]?.arrayValue?.first { $0["id"]?.stringValue == id }
    }
}

/// The concatenated output_text deltas of an SSE body.
func outputText(_ events: [(event: String, data: JSONValue)]) -> String {
    events.filter { $0.event == "response.output_text.delta" }.compactMap { $0.data["delta"]?.stringValue }.joined()
}

/// A scripted model definition (JSON) for an afmd used as an upstream.
func scriptedModel(_ id: String, steps: String, reasoning: Bool = false) -> String {
    #"{"id":"\#(id)","context_tokens":4096,"capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":\#(reasoning),"reasoning_optional":true},"steps":\#(steps)}"#
}

/// Polls until `condition` holds or `seconds` pass.
func waitFor(seconds: Double = 10, _ condition: () -> Bool) -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if condition() { return true }
        usleep(20_000)
    }
    return condition()
}
