// SPDX-License-Identifier: Apache-2.0

/// How one turn runs: its tool policy, limits and context policy.
public struct TurnPolicy: Sendable, Hashable {
    /// The tool policy (see ``ToolMode``).
    public var toolMode: ToolMode
    /// How many tool calls the turn may make in all; nil is unlimited. A call over budget gets an error output,
    /// and once the budget is spent the tools are removed from the next steps.
    public var maxToolCalls: Int?
    /// How many model steps (requests) the turn may take before it fails (`generation_failed`); openai-agents'
    /// `max_turns` default.
    public var maxSteps: Int
    /// How long a local tool call may run.
    public var toolTimeout: Duration
    /// How long the turn waits for the host to answer an external tool call (game hosts may take 70 s and more).
    public var externalToolTimeout: Duration
    /// The answer's schema, for a schema turn.
    public var schema: AgentSchema?
    /// Whether the oldest complete turns are left out of a request that would overflow the model's input budget.
    public var trimsContext: Bool
    /// `max_output_tokens` of each step; nil leaves the model's budget.
    public var maxOutputTokens: Int?
    /// `temperature` of each step; nil leaves the gateway's default.
    public var temperature: Double?
    /// Whether a step may make several calls at once (`parallel_tool_calls`); they then run concurrently.
    public var parallelToolCalls: Bool

    public init(
        toolMode: ToolMode = .auto, maxToolCalls: Int? = nil, maxSteps: Int = 10, toolTimeout: Duration = .seconds(60),
        externalToolTimeout: Duration = .seconds(120), schema: AgentSchema? = nil, trimsContext: Bool = true,
        maxOutputTokens: Int? = nil, temperature: Double? = nil, parallelToolCalls: Bool = true
    ) {
        self.toolMode = toolMode
        self.maxToolCalls = maxToolCalls
        self.maxSteps = maxSteps
        self.toolTimeout = toolTimeout
        self.externalToolTimeout = externalToolTimeout
        self.schema = schema
        self.trimsContext = trimsContext
        self.maxOutputTokens = maxOutputTokens
        self.temperature = temperature
        self.parallelToolCalls = parallelToolCalls
    }
}
