// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON
import Synchronization

/// An agent: instructions, a model, tools and a default turn policy, with the history of its complete turns.
///
/// An agent talks to a gateway over its HTTP API (Responses) like any client, so it works with any afmd and any
/// model. Turns of one agent never overlap: ``run(_:policy:)`` queues them in order. Separate agents run
/// concurrently.
///
/// ```
/// run(prompt) ─► turn queue ─► tools of the turn ─► steps: StepController ─► POST /v1/responses ─► ToolRuntime
///                                                   └► completed: history += turn │ failed/cancelled: history unchanged
/// ```
public final class Agent: Sendable {
    /// What an agent is made of.
    public struct Configuration: Sendable {
        /// The gateway.
        public var url: ServerURL
        /// The model id (or alias) every step asks.
        public var model: String
        /// The system text of every step.
        public var instructions: String?
        /// Tools offered on every turn.
        public var tools: [AgentTool]
        /// Sources of more tools, asked at the start of every turn (MCP servers).
        public var toolProviders: [any AgentToolProvider]
        /// The policy of turns that give none.
        public var policy: TurnPolicy
        /// Text added to the instructions of one turn, asked when the turn starts (after the agent's earlier turns
        /// ended): facts the host owns that change between turns, such as a game's world state. It is part of
        /// that turn's requests only, never of the history.
        public var turnContext: (@Sendable () async -> String?)?
        /// How many complete turns the history keeps, the oldest forgotten first (an NPC's memory of recent
        /// turns); nil keeps every turn.
        public var historyLimit: Int?

        public init(
            url: ServerURL = .default, model: String, instructions: String? = nil, tools: [AgentTool] = [],
            toolProviders: [any AgentToolProvider] = [], policy: TurnPolicy = TurnPolicy(),
            turnContext: (@Sendable () async -> String?)? = nil, historyLimit: Int? = nil
        ) {
            self.url = url
            self.model = model
            self.instructions = instructions
            self.tools = tools
            self.toolProviders = toolProviders
            self.policy = policy
            self.turnContext = turnContext
            self.historyLimit = historyLimit
        }
    }

    private struct State {
        /// Complete turns, oldest first; each is the prompt, then calls, outputs and the answer.
        var turns: [[JSONValue]] = []
        /// What `/v1/models` says of the model, once asked.
        var model: ModelFacts?
    }

    public let configuration: Configuration
    private let state = Mutex(State())
    private let queue = TurnQueue()

    public init(configuration: Configuration) {
        self.configuration = configuration
    }

    /// The transcript of the complete turns as Responses input items (prompt, calls, outputs, answers).
    public var history: [JSONValue] { state.withLock { $0.turns.flatMap { $0 } } }

    /// How many complete turns the history holds.
    public var turnCount: Int { state.withLock { $0.turns.count } }

    /// Forgets the history.
    public func clearHistory() {
        state.withLock { $0.turns = [] }
    }

    /// Checks a turn's answer before the turn joins the history; its error fails the turn (the history unchanged).
    public typealias Acceptance = @Sendable (AgentResponse) throws(AgentError) -> Void

    /// Starts a turn (it waits for the agent's earlier turns to end) and returns it at once. `accept` (when
    /// given) checks the answer first: a turn it refuses fails with its error and is not remembered.
    public func run(_ prompt: String, policy: TurnPolicy? = nil, accept: Acceptance? = nil) -> AgentRun {
        let (events, continuation) = AsyncStream<AgentEvent>.makeStream()
        let control = TurnControl()
        let outcome = TurnOutcome()
        let policy = policy ?? configuration.policy
        // The turn's place in line is taken here, in call order, not when its task first runs.
        let ticket = queue.take()
        let task = Task {
            await self.execute(
                prompt: prompt, policy: policy, accept: accept, ticket: ticket, control: control, continuation: continuation,
                outcome: outcome)
        }
        control.setTask(task)
        return AgentRun(events: events, control: control, outcome: outcome)
    }

    private func execute(
        prompt: String, policy: TurnPolicy, accept: Acceptance?, ticket: UInt64, control: TurnControl,
        continuation: AsyncStream<AgentEvent>.Continuation, outcome: TurnOutcome
    ) async {
        let emit: @Sendable (AgentEvent) -> Void = { continuation.yield($0) }
        guard await queue.acquire(ticket) else {
            finish(.failure(.cancelled), continuation: continuation, outcome: outcome)
            return
        }
        defer { queue.release() }
        var tools = configuration.tools
        // Who offers each tool name: two tools of one name would make every step a 400 from the gateway.
        var owners: [String: String] = [:]
        for tool in tools { owners[tool.name] = "the agent's own tools" }
        for provider in configuration.toolProviders {
            let owner = (provider as? MCPServer).map { "MCP server \($0.configuration.name)" } ?? "a tool provider"
            for tool in await provider.currentTools() {
                if let earlier = owners[tool.name] {
                    control.end()
                    finish(
                        .failure(AgentError(.invalidRequest, "two tools are named \"\(tool.name)\": one from \(earlier), one from \(owner)")),
                        continuation: continuation, outcome: outcome)
                    return
                }
                owners[tool.name] = owner
                tools.append(tool)
            }
        }
        var instructions = configuration.instructions
        if let context = await configuration.turnContext?(), !context.isEmpty {
            instructions = instructions.map { $0.isEmpty ? context : $0 + "\n\n" + context } ?? context
        }
        let facts = await modelFacts()
        let executor = TurnExecutor(
            client: ResponsesClient(url: configuration.url), model: configuration.model, instructions: instructions,
            tools: tools, policy: policy, history: state.withLock { $0.turns }, inputBudget: facts.inputBudget,
            acceptsImages: facts.acceptsImages, control: control, emit: emit)
        let result: Result<AgentResponse, AgentError>
        do {
            let (response, items) = try await executor.run(prompt: prompt)
            // A refused answer fails the turn before it is remembered (agents.md §1.7: failed turns roll back).
            try accept?(response)
            state.withLock { state in
                state.turns.append(items)
                if let limit = configuration.historyLimit, state.turns.count > max(limit, 0) {
                    state.turns.removeFirst(state.turns.count - max(limit, 0))
                }
                // An image no request will carry again keeps only its placeholder (what the model reads anyway).
                state.turns = ToolOutputItems.limitingImages(state.turns)
            }
            result = .success(response)
        } catch {
            result = .failure(error)
        }
        // Nothing of the turn may still run when it reports its end (a handler that timed out may).
        control.end()
        await control.awaitWork()
        finish(result, continuation: continuation, outcome: outcome)
    }

    private func finish(
        _ result: Result<AgentResponse, AgentError>, continuation: AsyncStream<AgentEvent>.Continuation, outcome: TurnOutcome
    ) {
        switch result {
        case .success(let response): continuation.yield(.completed(response))
        case .failure(let error): continuation.yield(.failed(error))
        }
        continuation.finish()
        outcome.set(result)
    }

    /// What the agent needs to know of its model.
    private struct ModelFacts {
        /// `max_input_tokens`; nil when the gateway did not say.
        var inputBudget: Int?
        /// The `vision` capability; false when the gateway did not say.
        var acceptsImages = false
    }

    /// The model's entry of `/v1/models` (an alias resolved to its target), asked once.
    private func modelFacts() async -> ModelFacts {
        if let known = state.withLock({ $0.model }) { return known }
        let models = (try? await ResponsesClient(url: configuration.url).modelsAsync()) ?? []
        var entry = models.first { $0.id == configuration.model }
        if let target = entry?.aliasOf { entry = models.first { $0.id == target } }
        let facts = ModelFacts(inputBudget: entry?.maxInputTokens, acceptsImages: entry?.capabilities?["vision"]?.boolValue ?? false)
        // A gateway that could not be asked is asked again next turn.
        if !models.isEmpty { state.withLock { $0.model = facts } }
        return facts
    }
}
