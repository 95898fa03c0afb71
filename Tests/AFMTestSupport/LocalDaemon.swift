// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

/// A real afmd serving the real local backend (llama.cpp) with the real default model (SmolLM2-135M).
///
/// `make test` builds both first (`scripts/build-local-backend`, `scripts/fetch-model`); when they are missing
/// the tests fail with the reason, they are never skipped.
public struct LocalDaemon {
    public let daemon: DaemonProcess
    public var port: Int { daemon.port }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public static var stagedBackends: String {
        ProcessInfo.processInfo.environment["AFM_STAGE_DIR"].map { $0 + "/backends" } ?? TestPaths.root + "/.build/afm/backends"
    }

    public static var model: String {
        ProcessInfo.processInfo.environment["AFM_MODEL"] ?? TestPaths.root + "/.cache/afm/models/smollm2-135m-instruct-q4_1.gguf"
    }

    /// Starts afmd with `local.so` and `Model=` the default model (or `model`), `ContextTokens=`, plus extra settings
    /// and extra environment variables for afmd (AFM_* configuration, for one).
    public init(model: String = LocalDaemon.model, contextTokens: Int = 2048, settings: String = "", environment: [String: String] = [:]) throws {
        let library = Self.stagedBackends + "/local.so"
        guard FileManager.default.fileExists(atPath: library) else {
            throw Failure(description: "\(library) is missing: run `make build` (scripts/build-local-backend)")
        }
        guard model != Self.model || FileManager.default.fileExists(atPath: model) else {
            throw Failure(description: "\(model) is missing: run scripts/fetch-model")
        }
        let directory = BackendDirectoryBuilder()
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/local.so", withDestinationPath: library)
        try FileManager.default.copyItem(atPath: Self.stagedBackends + "/local.json", toPath: directory.path + "/local.json")
        daemon = try DaemonProcess(
            backendDirectory: directory.path, config: "[Backend.local]\nModel=\(model)\nContextTokens=\(contextTokens)\n\(settings)",
            environment: environment)
    }

    public func client() throws -> TestHTTPClient { try TestHTTPClient(port: port, timeoutSeconds: 120) }

    /// Starts a long streamed answer (up to 500 tokens) and returns its connection once a few deltas arrived, for
    /// tests that interrupt a generation (a disconnect, a killed runner).
    public func startLongStream() throws -> TestHTTPClient {
        let client = try client()
        try client.sendRequest(
            "POST", "/v1/responses",
            body: Array(#"{"model":"on-device","input":"Count from one to five hundred in words.","stream":true,"max_output_tokens":500}"#.utf8))
        _ = try client.readUntil { $0.components(separatedBy: "response.output_text.delta").count > 3 }
        return client
    }

    public func status() throws -> JSONValue? {
        try client().get("/status").json?["backends"]?.arrayValue?.first { $0["id"] == "local" }
    }
}
