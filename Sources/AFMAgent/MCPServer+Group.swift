// SPDX-License-Identifier: Apache-2.0

extension MCPServer {
    /// Starts the servers in order (as ``start(_:)``); when one fails, those already started are stopped and its
    /// error is thrown (`tool_failed`), so a caller never holds half a set.
    public static func startAll(_ configurations: [MCPServerConfiguration]) async throws(AgentError) -> [MCPServer] {
        var servers: [MCPServer] = []
        for configuration in configurations {
            do {
                servers.append(try await start(configuration))
            } catch {
                for server in servers { await server.shutdown() }
                throw error
            }
        }
        return servers
    }
}
