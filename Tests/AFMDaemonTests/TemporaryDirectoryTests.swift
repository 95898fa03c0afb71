// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Testing

/// Tests leave nothing in /tmp: a harness removes the directories it made when the test lets go of it (the suites
/// left tens of thousands behind: afm-backends-, afmd-root-, afm-daemon-test-, … at about 550 afmd-root- an hour of
/// testing), and whatever else ``TestPaths/makeTemporaryDirectory(_:)`` made goes when the test process exits.
@Suite struct TemporaryDirectoryTests {
    /// Failed before: the backend directory, the config root and the scratch directory all stayed.
    @Test func aDaemonHarnessRemovesItsDirectoriesWhenReleased() throws {
        var paths: [String] = []
        do {
            let harness = try DaemonHarness(models: ["m": #"[{"text":"a"}]"#])
            paths = [harness.scratch, harness.directory.path, harness.daemon.root]
            #expect(try harness.client().post("/v1/responses", json: responsesBody(model: "m")).status == 200)
            #expect(paths.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        }
        // Under AddressSanitizer they stay on purpose, for LeakSanitizer's report at exit, in a TMPDIR of the run's
        // own that scripts/test-sanitized removes after it (TestPaths.keepsDirectoriesForLeakReports).
        let kept = TestPaths.keepsDirectoriesForLeakReports
        for path in paths {
            #expect(FileManager.default.fileExists(atPath: path) == kept, "\(path): \(kept ? "removed" : "left behind")")
        }
    }
}
