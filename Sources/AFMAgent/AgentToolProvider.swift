// SPDX-License-Identifier: Apache-2.0

/// A source of tools whose list can change between turns (an MCP server that sent `tools/list_changed`).
///
/// The agent asks every provider for its tools when a turn starts; a turn keeps the list it started with.
public protocol AgentToolProvider: Sendable {
    /// The tools to offer now.
    func currentTools() async -> [AgentTool]
}
