// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMClient
import AFMJSON

/// A non-player character: an agent with a persona, a memory of its recent turns, the world's facts in every
/// turn, and actions the game runs (external tools).
///
/// Turns of one NPC never overlap (they queue, as every agent's turns do); separate NPCs run concurrently.
///
/// ```
/// say(line) ─► agent turn: instructions = persona + world snapshot (at the turn's start) ─► text, actions
/// decide(situation, options) ─► schema turn {reasoning, choice ∈ options} ─► Decision
/// ```
public final class NPC: Sendable {
    /// What an NPC is made of.
    public struct Configuration: Sendable {
        public var url: ServerURL
        public var model: String
        public var persona: Persona
        /// Actions in the world, run by the game: external tools.
        public var actions: [AgentTool]
        /// How many of its most recent turns the NPC remembers.
        public var memoryTurns: Int
        /// The policy of `say` turns (decisions derive theirs from it).
        public var policy: TurnPolicy

        public init(
            url: ServerURL = .default, model: String, persona: Persona, actions: [AgentTool] = [], memoryTurns: Int = 8,
            policy: TurnPolicy = TurnPolicy()
        ) {
            self.url = url
            self.model = model
            self.persona = persona
            self.actions = actions
            self.memoryTurns = memoryTurns
            self.policy = policy
        }
    }

    public let configuration: Configuration
    /// The NPC's agent (its history is the NPC's memory).
    public let agent: Agent
    public let world: WorldState

    public init(configuration: Configuration, world: WorldState) {
        self.configuration = configuration
        self.world = world
        agent = Agent(
            configuration: Agent.Configuration(
                url: configuration.url, model: configuration.model, instructions: configuration.persona.instructions,
                tools: configuration.actions, policy: configuration.policy,
                turnContext: { [world] in world.turnContext() }, historyLimit: configuration.memoryTurns))
    }

    /// A dialogue turn: `speaker` (nil: no one in particular) says `line` to the NPC; the answer streams as
    /// `text` events, and the NPC may act through its actions.
    public func say(_ line: String, from speaker: String? = nil, policy: TurnPolicy? = nil) -> AgentRun {
        let prompt = speaker.map { "\($0) says: \(line)" } ?? line
        return agent.run(prompt, policy: policy)
    }

    /// A decision turn: the answer is `{reasoning, choice}` with `choice` one of `options` (see
    /// ``DecisionEngine``); read it with ``DecisionEngine/decision(from:options:)``. A turn whose answer chose
    /// something else fails with `invalid_schema` and stays out of the NPC's memory.
    ///
    /// - Throws: `invalid_request` when the options are empty, too many, too long or repeated.
    public func decide(_ situation: String, options: [String], policy: TurnPolicy? = nil) throws(AgentError) -> AgentRun {
        try DecisionEngine.validate(options: options)
        return agent.run(
            DecisionEngine.prompt(situation: situation, options: options),
            policy: DecisionEngine.policy(options: options, base: policy ?? configuration.policy),
            // A choice that was not offered fails the turn, and the NPC does not remember it.
            accept: { response throws(AgentError) in _ = try DecisionEngine.decision(from: response, options: options) })
    }
}
