// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMGame
import AFMJSON

/// The game methods (agents.md §10): `npc.create`, `npc.say`, `npc.decide`, `world.set`, `world.patch`,
/// `world.get`. NPCs are agents (their ids work with `agent.history`, `agent.reset`, `agent.close`, and their
/// runs with `run.submitToolOutput` and `run.cancel`).
extension Bridge {
    func createNPC(_ request: JSONRPCRequest, _ params: inout BridgeParams) throws(JSONRPCError) {
        guard var fields = try params.optionalObject("persona") else {
            throw .invalidParams("persona", "is required (an object with at least a name)")
        }
        let persona = Persona(
            name: try fields.string("name"), traits: try fields.optionalStrings("traits", max: 64) ?? [],
            voice: try fields.optionalString("voice", maxBytes: 4096), goals: try fields.optionalStrings("goals", max: 64) ?? [],
            background: try fields.optionalString("background", maxBytes: 16384))
        try fields.finish()
        guard !persona.name.isEmpty, persona.name.utf8.count <= 200 else {
            throw .invalidParams("persona.name", "must be 1 to 200 bytes long")
        }
        var configuration = NPC.Configuration(
            url: try AgentSpec.url(&params, default: self.configuration.url),
            model: try params.optionalString("model", maxBytes: 256) ?? self.configuration.model, persona: persona)
        configuration.actions = try AgentSpec.tools(&params, key: "actions", externalByDefault: true)
        if let turns = try params.optionalInt("memory_turns", in: 0...1_000) { configuration.memoryTurns = turns }
        if var given = try params.optionalObject("policy") {
            configuration.policy = try AgentSpec.policy(&given, base: configuration.policy)
            try given.finish()
        }
        try params.finish()
        try reserveAgent()
        let world = self.world
        guard
            let id = register(npc: true, { id in
                let npc = NPC(configuration: configuration, world: world)
                return AgentEntry(id: id, agent: npc.agent, npc: npc)
            })
        else { throw .bridge("shut_down", "the bridge is shutting down") }
        reply(request, ["npc_id": .string(id)])
    }

    func say(_ request: JSONRPCRequest, _ params: inout BridgeParams) throws(JSONRPCError) {
        let npc = try self.npc(&params)
        let text = try params.string("text")
        let speaker = try params.optionalString("speaker", maxBytes: 200)
        let policy = try turnPolicy(&params, npc: npc.npc)
        try params.finish()
        try startRun(request, agentID: npc.id, field: "npc_id") { npc.npc.say(text, from: speaker, policy: policy) }
    }

    func decide(_ request: JSONRPCRequest, _ params: inout BridgeParams) throws(JSONRPCError) {
        let npc = try self.npc(&params)
        let situation = try params.optionalString("situation") ?? ""
        let options = try params.strings("options", max: DecisionEngine.maxOptions + 1)
        do {
            try DecisionEngine.validate(options: options)
        } catch {
            throw .invalidParams(params.field("options"), error.message)
        }
        let policy = try turnPolicy(&params, npc: npc.npc)
        try params.finish()
        try startRun(request, agentID: npc.id, field: "npc_id", options: options) { () throws(AgentError) in
            try npc.npc.decide(situation, options: options, policy: policy)
        }
    }

    func setWorld(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let facts = try params.rawObject("facts")
        try params.finish()
        do {
            return ["revision": .number(JSONNumber(try world.set(facts)))]
        } catch {
            throw .invalidParams("facts", error.message)
        }
    }

    func patchWorld(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let patch = try params.rawObject("patch")
        try params.finish()
        do {
            return ["revision": .number(JSONNumber(try world.patch(patch)))]
        } catch {
            throw .invalidParams("patch", error.message)
        }
    }

    func getWorld(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        try params.finish()
        let (facts, revision) = world.snapshot
        return ["facts": .object(facts), "revision": .number(JSONNumber(revision))]
    }

    /// The NPC named by `npc_id`.
    private func npc(_ params: inout BridgeParams) throws(JSONRPCError) -> (id: String, npc: NPC) {
        let entry = try agent(&params, key: "npc_id")
        guard let npc = entry.npc else {
            throw .invalidParams(params.field("npc_id"), "\"\(entry.id)\" is an agent, not an NPC (use agent.run)")
        }
        return (entry.id, npc)
    }

    /// The NPC's policy with the request's `policy` overrides, nil when it gives none.
    private func turnPolicy(_ params: inout BridgeParams, npc: NPC) throws(JSONRPCError) -> TurnPolicy? {
        guard var given = try params.optionalObject("policy") else { return nil }
        let policy = try AgentSpec.policy(&given, base: npc.configuration.policy)
        try given.finish()
        return policy
    }
}
