// SPDX-License-Identifier: Apache-2.0
@testable import AFMBackends
import AFMTestSupport
import Foundation
import Testing

/// A runner gets the daemon's variables its manifest names, by exact name: never another component's that merely
/// share a prefix with the backend id.
@Suite(.serialized) struct RunnerEnvironmentTests {
    /// Writes `<id>.json` with the given extra manifest fields into a fresh directory and reads it back.
    func manifest(id: String, extra: String = "") throws -> BackendManifest {
        let directory = TestPaths.makeTemporaryDirectory("afm-manifest")
        let path = directory + "/\(id).json"
        let text = #"{"manifest_version":1,"id":"\#(id)","abi_major":1,"hosting":"runner"\#(extra)}"#
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
        return try BackendManifest(contentsOf: path)
    }

    /// Runs `body` with the variables set in this process's environment, then puts back what was there (a
    /// sanitizer build's ASAN_OPTIONS must outlive this test: every runner started later inherits it).
    func with(_ variables: [String: String], _ body: () throws -> Void) rethrows {
        let saved = variables.keys.map { ($0, ProcessInfo.processInfo.environment[$0]) }
        for (key, value) in variables { setenv(key, value, 1) }
        defer {
            for (key, value) in saved {
                if let value { setenv(key, value, 1) } else { unsetenv(key) }
            }
        }
        try body()
    }

    @Test func anotherComponentsVariablesAreNotPassed() throws {
        try with([
            "AFM_CLOUD_KEY": "s3cret", "AFM_OPEN_AI_KEY": "sk-other", "AFM_SERVER_LISTEN": "0.0.0.0:1",
            "AFM_MY_X_TOKEN": "t",
        ]) {
            for id in ["cloud", "open", "server", "my-x", "my_x", "my.x"] {
                let environment = RunnerInstanceHost.environment(for: try manifest(id: id))
                let passed = environment.filter { $0.hasPrefix("AFM_") && !$0.hasPrefix("AFM_BACKEND_ID=") }
                #expect(passed.isEmpty, "backend \(id) got \(passed)")
            }
        }
    }

    @Test func theVariablesTheManifestNamesArePassed() throws {
        try with(["AFM_LOCAL_DEBUG": "1", "AFM_LOCAL_OTHER": "x", "AFM_LOCAL_PROGRESS_MS": "5"]) {
            // The local backend's own manifest, as shipped.
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().path
            let local = try BackendManifest(contentsOf: root + "/Plugins/local/local.json")
            let environment = RunnerInstanceHost.environment(for: local)
            #expect(environment.contains("AFM_LOCAL_DEBUG=1"))
            #expect(environment.contains("AFM_LOCAL_PROGRESS_MS=5"))
            #expect(!environment.contains { $0.hasPrefix("AFM_LOCAL_OTHER=") }, "\(environment)")
        }
    }

    /// A sanitizer build's runner runs with afmd's sanitizer options: without ASAN_OPTIONS (handle_segv=0) ASan's
    /// own handler turned a backend's deliberate segfault into exit status 1, and afmd reported no signal
    /// (RunnerTests.aCrashFailsExactlyTheRequestsOnThatRunner under `make test-asan`).
    @Test func theSanitizersOptionsArePassed() throws {
        let options = [
            "ASAN_OPTIONS": "handle_segv=0:detect_leaks=1", "LSAN_OPTIONS": "suppressions=/x/address.supp",
            "TSAN_OPTIONS": "halt_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1",
        ]
        try with(options) {
            let environment = RunnerInstanceHost.environment(for: try manifest(id: "plain"))
            for (key, value) in options {
                #expect(environment.contains("\(key)=\(value)"), "\(environment)")
            }
        }
    }

    @Test(arguments: [
        #","environment":["AFM_OPEN_"]"#, #","environment":"AFM_OPEN_X""#, #","environment":["AFM_OPEN_x"]"#,
        #","environment":[1]"#, #","environment":["PATH"]"#, #","environment":["AFM_SERVER_LISTEN"]"#,
    ])
    func aManifestMayNameOnlyVariablesOfItsOwnNamespace(_ extra: String) throws {
        #expect(throws: BackendLoadError.self) { try manifest(id: "open", extra: extra) }
    }
}
