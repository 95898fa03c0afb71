// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMClient
import AFMJSON

/// An agent as `agent.create` describes it: gateway, model, instructions, tools the host runs, MCP servers,
/// and the default turn policy. Also the readers of the pieces other methods share (policy, tool choice,
/// schema, tools).
struct AgentSpec: Sendable {
    var url: ServerURL
    var model: String
    var instructions: String?
    var tools: [AgentTool]
    var policy: TurnPolicy
    var historyLimit: Int?
    /// MCP servers to start for the agent (their tools join the agent's).
    var servers: [MCPServerConfiguration]

    /// The most tools one agent may have.
    static let maxTools = 128
    /// The most MCP servers one agent may start.
    static let maxServers = 16

    init(_ params: inout BridgeParams, defaults: BridgeConfiguration) throws(JSONRPCError) {
        url = try Self.url(&params, default: defaults.url)
        model = try params.optionalString("model", maxBytes: 256) ?? defaults.model
        instructions = try params.optionalString("instructions")
        tools = try Self.tools(&params, key: "tools", externalByDefault: false)
        servers = try Self.servers(&params)
        policy = TurnPolicy()
        if var given = try params.optionalObject("policy") {
            policy = try Self.policy(&given, base: policy)
            try given.finish()
        }
        historyLimit = try params.optionalInt("history_turns", in: 0...100_000)
        if case .named(let name) = policy.toolMode, !tools.contains(where: { $0.name == name }) {
            throw .invalidParams(params.field("policy.tool_choice"), "names \"\(name)\", which is not one of the agent's tools")
        }
    }

    /// Whether creating the agent has to start something first (MCP servers).
    var needsStart: Bool { !servers.isEmpty }

    /// What ``start()`` started: tool providers for the agent, and how to stop them.
    struct Started: Sendable {
        var providers: [any AgentToolProvider] = []
        var closers: [@Sendable () async -> Void] = []
    }

    /// Starts the MCP servers in order; when one fails, those already started are stopped and its error thrown
    /// (`tool_failed`).
    func start() async throws(AgentError) -> Started {
        let started = try await MCPServer.startAll(servers)
        return Started(providers: started, closers: started.map { server in { await server.shutdown() } })
    }

    /// `mcp_servers`: `[{"name","command","args","env","cwd","startup_timeout_ms","tool_timeout_ms"}]`.
    static func servers(_ params: inout BridgeParams) throws(JSONRPCError) -> [MCPServerConfiguration] {
        guard let entries = try params.optionalObjects("mcp_servers", max: maxServers) else { return [] }
        var servers: [MCPServerConfiguration] = []
        for var entry in entries {
            let name = try entry.name("name")
            guard !servers.contains(where: { $0.name == name }) else {
                throw .invalidParams(entry.field("name"), "another MCP server is already named \"\(name)\"")
            }
            let command = try entry.string("command")
            guard !command.isEmpty else { throw .invalidParams(entry.field("command"), "must not be empty") }
            var server = MCPServerConfiguration(name: name, command: command)
            server.arguments = try entry.optionalStrings("args", max: 1024) ?? []
            server.environment = try entry.optionalStringMap("env") ?? [:]
            server.directory = try entry.optionalString("cwd", maxBytes: 4096)
            if let value = try entry.optionalInt("startup_timeout_ms", in: 1...600_000) { server.startupTimeout = .milliseconds(value) }
            if let value = try entry.optionalInt("tool_timeout_ms", in: 1...86_400_000) { server.toolTimeout = .milliseconds(value) }
            try entry.finish()
            servers.append(server)
        }
        return servers
    }

    func configuration(providers: [any AgentToolProvider] = []) -> Agent.Configuration {
        Agent.Configuration(
            url: url, model: model, instructions: instructions, tools: tools, toolProviders: providers, policy: policy,
            historyLimit: historyLimit)
    }

    static func url(_ params: inout BridgeParams, default value: ServerURL) throws(JSONRPCError) -> ServerURL {
        guard let text = try params.optionalString("url", maxBytes: 2048) else { return value }
        guard let url = ServerURL(string: text) else {
            throw .invalidParams(params.field("url"), "must look like http://127.0.0.1:11535 (plain HTTP, a numeric host or localhost)")
        }
        return url
    }

    /// Tools the host runs: `[{"name","description","parameters","external":true,"timeout_ms"}]`. With
    /// `externalByDefault` (NPC actions) `external` may be left out.
    static func tools(_ params: inout BridgeParams, key: String, externalByDefault: Bool) throws(JSONRPCError) -> [AgentTool] {
        guard let entries = try params.optionalObjects(key, max: maxTools) else { return [] }
        var tools: [AgentTool] = []
        for var entry in entries {
            let name = try entry.name("name")
            guard !tools.contains(where: { $0.name == name }) else {
                throw .invalidParams(entry.field("name"), "another tool is already named \"\(name)\"")
            }
            let description = try entry.optionalString("description", maxBytes: 16384) ?? ""
            let parameters = try entry.optionalRawObject("parameters") ?? ["type": "object", "properties": [:]]
            guard parameters["type"]?.stringValue == "object" else {
                throw .invalidParams(entry.field("parameters"), "must be a JSON Schema with \"type\": \"object\"")
            }
            let external = try entry.optionalBool("external") ?? externalByDefault
            guard external else {
                throw .invalidParams(
                    entry.field("external"),
                    "must be true: the bridge runs no tools itself; the host runs external tools (or use mcp_servers)")
            }
            let timeout = try entry.optionalInt("timeout_ms", in: 1...86_400_000)
            try entry.finish()
            tools.append(
                .external(name: name, description: description, parameters: .object(parameters), timeout: timeout.map { .milliseconds($0) }))
        }
        return tools
    }

    /// A turn policy: `tool_choice`, `max_tool_calls`, `max_steps`, `tool_timeout_ms`, `external_tool_timeout_ms`,
    /// `max_output_tokens`, `temperature`, `parallel_tool_calls`, `trim_context`; absent fields keep `base`'s.
    static func policy(_ params: inout BridgeParams, base: TurnPolicy) throws(JSONRPCError) -> TurnPolicy {
        var policy = base
        if let choice = params.raw("tool_choice") { policy.toolMode = try toolMode(choice, field: params.field("tool_choice")) }
        if let value = try params.optionalInt("max_tool_calls", in: 0...10_000) { policy.maxToolCalls = value }
        if let value = try params.optionalInt("max_steps", in: 1...1_000) { policy.maxSteps = value }
        if let value = try params.optionalInt("tool_timeout_ms", in: 1...86_400_000) { policy.toolTimeout = .milliseconds(value) }
        if let value = try params.optionalInt("external_tool_timeout_ms", in: 1...86_400_000) {
            policy.externalToolTimeout = .milliseconds(value)
        }
        if let value = try params.optionalInt("max_output_tokens", in: 1...1_000_000) { policy.maxOutputTokens = value }
        if let value = try params.optionalDouble("temperature", in: 0...2) { policy.temperature = value }
        if let value = try params.optionalBool("parallel_tool_calls") { policy.parallelToolCalls = value }
        if let value = try params.optionalBool("trim_context") { policy.trimsContext = value }
        return policy
    }

    /// `"auto"`, `"none"`, `"required"`, or `{"type":"function","name":…}` (`type` optional).
    static func toolMode(_ value: JSONValue, field: String) throws(JSONRPCError) -> ToolMode {
        switch value {
        case "auto": return .auto
        case "none": return .none
        case "required": return .required
        case .object(let object):
            var params = BridgeParams(object, path: field)
            if let type = try params.optionalString("type", maxBytes: 64), type != "function" {
                throw .invalidParams(params.field("type"), "must be \"function\"")
            }
            let name = try params.name("name")
            try params.finish()
            return .named(name)
        default:
            throw .invalidParams(field, "must be \"auto\", \"none\", \"required\" or {\"type\":\"function\",\"name\":…}")
        }
    }

    /// A schema turn's `{"name","schema"}` (`name` defaults to `answer`).
    static func schema(_ params: inout BridgeParams) throws(JSONRPCError) -> AgentSchema {
        let name = try params.optionalString("name", maxBytes: 64) ?? "answer"
        let schema = try params.rawObject("schema")
        guard schema["type"]?.stringValue == "object" else {
            throw .invalidParams(params.field("schema"), "must be a JSON Schema with \"type\": \"object\"")
        }
        return AgentSchema(name: name, schema: .object(schema))
    }
}
