// SPDX-License-Identifier: Apache-2.0

/// How to start one MCP server over stdio (Codex's `[mcp_servers.<name>]`: `command`, `args`, `env`, `cwd`,
/// `startup_timeout_sec`, `tool_timeout_sec`).
public struct MCPServerConfiguration: Sendable, Hashable {
    /// The server's name, used in messages and events.
    public var name: String
    /// The executable; without a slash it is looked up in `PATH`.
    public var command: String
    public var arguments: [String]
    /// Variables added to (or replacing those of) this process's environment for the server.
    public var environment: [String: String]
    /// The server's working directory; nil for this process's.
    public var directory: String?
    /// How long the server may take to answer `initialize` and its first `tools/list` (Codex: 10 s).
    public var startupTimeout: Duration
    /// How long one `tools/call` may take (Codex: 60 s).
    public var toolTimeout: Duration

    public init(
        name: String, command: String, arguments: [String] = [], environment: [String: String] = [:],
        directory: String? = nil, startupTimeout: Duration = .seconds(10), toolTimeout: Duration = .seconds(60)
    ) {
        self.name = name
        self.command = command
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
        self.startupTimeout = startupTimeout
        self.toolTimeout = toolTimeout
    }
}
