// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import Synchronization

/// A running MCP server (stdio) whose tools an agent can offer: the initialize handshake with version
/// negotiation, `tools/list` with pagination, `tools/call`, and `notifications/tools/list_changed`.
///
/// ```swift
/// let server = try await MCPServer.start(MCPServerConfiguration(name: "files", command: "mcp-files"))
/// let agent = Agent(configuration: .init(model: "on-device", toolProviders: [server]))
/// …
/// await server.shutdown()
/// ```
///
/// A tool that reports `isError` gives the model an error output; a server that dies, or does not answer
/// within the tool timeout, fails the call (an error output too), and every later call fails at once. A server
/// that stops reading its input fails the calls made then with `busy` (its input queue is bounded).
///
/// Dropping the last reference stops the server as ``shutdown()`` does, without waiting: its process is ended
/// and reaped, and its two threads and five descriptors go with it.
public final class MCPServer: AgentToolProvider, Sendable {
    /// The protocol revisions this client speaks (tools are the same in all of them), newest first.
    public static let supportedProtocolVersions = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]

    /// A tool as the server lists it.
    public struct Tool: Sendable, Hashable {
        public var name: String
        public var description: String
        public var inputSchema: JSONValue
    }

    public let configuration: MCPServerConfiguration
    /// The revision both sides agreed on.
    public let protocolVersion: String
    /// The server's `serverInfo` (`name`, `version`).
    public let serverInfo: JSONValue
    /// The server's `instructions`, if it gave any.
    public let instructions: String?

    private let connection: MCPConnection
    private struct State {
        var tools: [Tool] = []
        var stale = false
    }

    private let state = Mutex(State())

    private init(configuration: MCPServerConfiguration, connection: MCPConnection, result: JSONValue, version: String) {
        self.configuration = configuration
        self.connection = connection
        self.protocolVersion = version
        self.serverInfo = result["serverInfo"] ?? .null
        self.instructions = result["instructions"]?.stringValue
    }

    deinit {
        connection.stop()
    }

    /// The server's process id (for diagnostics; the process is reaped once the server is stopped).
    public var processID: Int32 { connection.processID }

    /// Starts the server, performs the handshake and lists its tools, all within the startup timeout.
    ///
    /// - Throws: `tool_failed` when the command cannot start, the server does not answer in time, exits, or
    ///   offers only protocol revisions this client does not speak (the server is then stopped).
    public static func start(_ configuration: MCPServerConfiguration) async throws(AgentError) -> MCPServer {
        let connection = try MCPConnection(configuration: configuration)
        do {
            let params: JSONValue = [
                "protocolVersion": .string(supportedProtocolVersions[0]), "capabilities": [:],
                "clientInfo": ["name": "afm", "version": .string(AFMVersion.string)],
            ]
            let result = try await connection.request("initialize", params: params, timeout: configuration.startupTimeout)
            guard let version = result["protocolVersion"]?.stringValue, supportedProtocolVersions.contains(version) else {
                throw AgentError(
                    .toolFailed,
                    "MCP server \(configuration.name) speaks protocol \(result["protocolVersion"]?.jsonString ?? "?"); "
                        + "this client speaks \(supportedProtocolVersions.joined(separator: ", "))")
            }
            let server = MCPServer(configuration: configuration, connection: connection, result: result, version: version)
            connection.setNotificationHandler { [weak server] method, _ in
                if method == "notifications/tools/list_changed" { server?.state.withLock { $0.stale = true } }
            }
            connection.notify("notifications/initialized")
            let tools = try await server.listTools(timeout: configuration.startupTimeout)
            server.state.withLock { $0.tools = tools }
            return server
        } catch {
            await connection.close(grace: .milliseconds(200))
            throw error as? AgentError ?? AgentError(.toolFailed, "MCP server \(configuration.name): \(error)")
        }
    }

    /// Every tool the server offers now (`tools/list`, following `nextCursor`).
    public func listTools() async throws(AgentError) -> [Tool] {
        try await listTools(timeout: configuration.toolTimeout)
    }

    private func listTools(timeout: Duration) async throws(AgentError) -> [Tool] {
        var tools: [Tool] = []
        var cursor: String?
        for _ in 0..<1000 {
            let params: JSONValue = cursor.map { ["cursor": .string($0)] } ?? [:]
            let result = try await connection.request("tools/list", params: params, timeout: timeout)
            for item in result["tools"]?.arrayValue ?? [] {
                guard let name = item["name"]?.stringValue else { continue }
                tools.append(
                    Tool(
                        name: name, description: item["description"]?.stringValue ?? item["title"]?.stringValue ?? "",
                        inputSchema: item["inputSchema"] ?? ["type": "object", "properties": [:]]))
            }
            guard let next = result["nextCursor"]?.stringValue, !next.isEmpty else { return tools }
            cursor = next
        }
        throw AgentError(.toolFailed, "MCP server \(configuration.name) listed more than 1000 pages of tools")
    }

    /// Calls a tool. A result with `isError` is an error output; a JSON-RPC error, a timeout or a dead server
    /// throws `tool_failed`.
    public func callTool(_ name: String, arguments: JSONValue) async throws(AgentError) -> AgentToolOutput {
        let result = try await connection.request(
            "tools/call", params: ["name": .string(name), "arguments": arguments], timeout: configuration.toolTimeout)
        var content: [AgentToolOutput.Content] = []
        for part in result["content"]?.arrayValue ?? [] {
            switch part["type"]?.stringValue {
            case "text": content.append(.text(part["text"]?.stringValue ?? ""))
            case "image":
                content.append(.image(mimeType: part["mimeType"]?.stringValue ?? "image/png", base64: part["data"]?.stringValue ?? ""))
            case "resource":
                content.append(.text(part["resource"]?["text"]?.stringValue ?? "[resource \(part["resource"]?["uri"]?.stringValue ?? "")]"))
            case "resource_link": content.append(.text("[resource \(part["uri"]?.stringValue ?? "")]"))
            default: content.append(.text(part.jsonString))
            }
        }
        if content.isEmpty, let structured = result["structuredContent"] { content = [.text(structured.jsonString)] }
        return AgentToolOutput(content: content, isError: result["isError"]?.boolValue ?? false)
    }

    /// The tools as agent tools (local tools whose handler calls this server), listed again after the server
    /// said its list changed.
    public func currentTools() async -> [AgentTool] {
        let stale = state.withLock { state in
            defer { state.stale = false }
            return state.stale
        }
        if stale, let tools = try? await listTools() { state.withLock { $0.tools = tools } }
        return state.withLock { $0.tools }.map { tool in
            AgentTool.local(
                name: tool.name, description: tool.description, parameters: tool.inputSchema,
                timeout: configuration.toolTimeout + .seconds(1)
            ) { [self] arguments in
                try await callTool(tool.name, arguments: arguments)
            }
        }
    }

    /// The tools as last listed (without asking the server).
    public var tools: [Tool] { state.withLock { $0.tools } }

    /// Stops the server: its input is closed, then `SIGTERM`, then `SIGKILL` (each after 2 s); calls still
    /// waiting fail. Returns how the process ended ("exit status 0", "signal 15 (SIGTERM)"), nil if unknown.
    @discardableResult
    public func shutdown() async -> String? {
        await connection.close().map(\.description)
    }
}
