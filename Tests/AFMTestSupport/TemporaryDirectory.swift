// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A temporary directory a test owns: made by ``TestPaths/makeTemporaryDirectory(_:)``, removed with everything in it
/// when the owner goes. A harness holds one per directory it makes, so the directories go when the test lets go of
/// the harness, whether the test passed, failed an expectation or threw; what nothing owns goes when the test process
/// exits. (The suites used to leave every directory behind: tens of thousands in /tmp.)
public final class TemporaryDirectory: Sendable {
    public let path: String

    /// Makes a fresh directory (`/tmp/LABEL-PID-XXXXXXXX`).
    public init(_ label: String = "afm-test") {
        path = TestPaths.makeTemporaryDirectory(label)
    }

    /// Takes over a directory made elsewhere (removed when this goes).
    public init(adopting path: String) {
        self.path = path
    }

    deinit { TestPaths.removeTemporaryDirectory(path) }
}
