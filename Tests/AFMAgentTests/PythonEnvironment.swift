// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation

/// The test virtualenv with the pinned PyPI packages (`mcp` among them), made by scripts/setup-python when missing
/// or stale: a test that needs it installs it, or fails with the reason.
enum PythonEnvironment {
    struct Failure: Error, CustomStringConvertible { var description: String }

    private static let ready: Result<String, Failure> = {
        do {
            let setup = try CommandOutput.run(TestPaths.root + "/scripts/setup-python", [])
            guard setup.status == 0 else { return .failure(Failure(description: "scripts/setup-python failed:\n\(setup.output)")) }
            return .success(TestPaths.root + "/.venv/bin/python")
        } catch {
            return .failure(Failure(description: "cannot run scripts/setup-python: \(error)"))
        }
    }()

    /// `.venv/bin/python`.
    static func python() throws -> String { try ready.get() }

    /// The MCP test server (Tests/Fixtures/mcp/test_server.py).
    static var mcpTestServer: String { TestPaths.root + "/Tests/Fixtures/mcp/test_server.py" }
}
