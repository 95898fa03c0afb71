// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// Issue 4, "Failures": a bad model file, an architecture llama.cpp does not know, or a model that does not fit in
/// memory → the backend reports the reason, `/status` shows it, `on-device` gets 503 `model_unavailable`, and the
/// daemon stays up. Every case uses real files derived from the real default model.
@Suite struct LocalFailureTests {
    enum Case: String, CaseIterable, CustomTestStringConvertible {
        case notAGGUF, truncated, unknownArchitecture, outOfMemory
        var testDescription: String { rawValue }
    }

    /// A GGUF copy of the default model whose `general.architecture` value says `xyzzy` instead of `llama`.
    static func unknownArchitectureModel(in directory: String) throws -> String {
        var bytes = try Data(contentsOf: URL(fileURLWithPath: LocalDaemon.model))
        let key = Data("general.architecture".utf8)
        let keyRange = try #require(bytes.range(of: key), "the default model has no general.architecture key")
        // Key, then the value type (UInt32: 8 = string), the length (UInt64: 5) and the bytes "llama".
        let valueStart = keyRange.upperBound + 4 + 8
        #expect(bytes[valueStart..<valueStart + 5] == Data("llama".utf8))
        bytes.replaceSubrange(valueStart..<valueStart + 5, with: Data("xyzzy".utf8))
        let path = directory + "/xyzzy.gguf"
        try bytes.write(to: URL(fileURLWithPath: path))
        return path
    }

    @Test(arguments: Case.allCases)
    func aModelThatCannotServeIsReportedAndTheDaemonStaysUp(_ failure: Case) throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-bad-model")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let model: String
        var settings = ""
        var contextTokens = 2048
        let expectedCode: String
        let expectedText: String
        switch failure {
        case .notAGGUF:
            model = directory + "/notes.gguf"
            try "These are notes, not a model.\n".write(toFile: model, atomically: true, encoding: .utf8)
            (expectedCode, expectedText) = ("model_invalid", "not a GGUF file")
        case .truncated:
            model = directory + "/truncated.gguf"
            let handle = try #require(FileHandle(forReadingAtPath: LocalDaemon.model))
            try handle.read(upToCount: 1 << 20)?.write(to: URL(fileURLWithPath: model))
            try handle.close()
            (expectedCode, expectedText) = ("model_invalid", model)
        case .unknownArchitecture:
            model = try Self.unknownArchitectureModel(in: directory)
            (expectedCode, expectedText) = ("model_unsupported", "xyzzy")
        case .outOfMemory:
            // The runner's address space is capped (RLIMIT_AS) below what a 16,384-cell KV cache needs.
            model = LocalDaemon.model
            settings = "RunnerMemoryLimitMB=400\n"
            contextTokens = 4096
            (expectedCode, expectedText) = ("out_of_memory", "memory")
        }
        let local = try LocalDaemon(model: model, contextTokens: contextTokens, settings: settings)
        if failure == .outOfMemory, let sanitizer = Sanitizer.current {
            // A sanitizer's shadow memory has reserved terabytes of address space before the runner's main, so the
            // runner cannot apply RLIMIT_AS (RunnerOptions.applyLimits): the model loads, and the runner says why.
            let status = try #require(try local.status())
            #expect(status["state"] == "ready", "\(sanitizer.name): \(status)")
            #expect(local.daemon.log.contains("RunnerMemoryLimitMB=400 is not applied"), "\(local.daemon.log)")
            return
        }
        let status = try #require(try local.status())
        #expect(status["state"] == "unavailable", "\(status)")
        #expect(status["reason_code"] == .string(expectedCode), "\(status)")
        #expect(status["reason"]?.stringValue?.contains(expectedText) == true, "\(status)")

        let response = try local.client().post("/v1/responses", json: #"{"model":"on-device","input":"hi"}"#)
        #expect(response.status == 503, "\(response)")
        #expect(response.json?["error"]?["code"] == "model_unavailable", "\(response)")
        #expect(try local.client().get("/health").status == 200)
        #expect(local.daemon.process.isRunning)
        // Not a crash: the runner reported the reason and is still there.
        #expect(status["last_crash"] == nil || status["last_crash"] == .null, "\(status)")
    }
}
