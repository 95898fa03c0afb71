// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMGame
import AFMJSON

/// The agent and run methods: `agent.create`, `agent.run`, `run.submitToolOutput`, `run.cancel`,
/// `agent.history`, `agent.reset`, `agent.close`.
extension Bridge {
    func createAgent(_ request: JSONRPCRequest, _ params: inout BridgeParams) throws(JSONRPCError) {
        let spec = try AgentSpec(&params, defaults: configuration)
        try params.finish()
        try reserveAgent()
        guard spec.needsStart else {
            guard let id = register({ AgentEntry(id: $0, agent: Agent(configuration: spec.configuration())) }) else {
                throw .bridge("shut_down", "the bridge is shutting down")
            }
            reply(request, ["agent_id": .string(id)])
            return
        }
        spawn { [self] in
            let started: AgentSpec.Started
            do throws(AgentError) {
                started = try await spec.start()
            } catch {
                state.withLock { $0.creating -= 1 }
                reply(request, error: JSONRPCError(error))
                return
            }
            let id = register { id in
                AgentEntry(id: id, agent: Agent(configuration: spec.configuration(providers: started.providers)), closers: started.closers)
            }
            guard let id else {
                // The bridge shut down while the servers started: they stop with nothing to serve.
                for close in started.closers { await close() }
                reply(request, error: .bridge("shut_down", "the bridge is shutting down"))
                return
            }
            reply(request, ["agent_id": .string(id)])
        }
    }

    /// Counts an agent about to be made against the limit.
    func reserveAgent() throws(JSONRPCError) {
        try state.withLock { (state) throws(JSONRPCError) in
            guard state.agents.count + state.creating < configuration.maxAgents else {
                throw .bridge("limit_reached", "this bridge already has \(configuration.maxAgents) agents and NPCs; close some first")
            }
            state.creating += 1
        }
    }

    /// Registers the entry `make` builds from its new id (`agent-N` or `npc-N`) for an agent reserved with
    /// ``reserveAgent()``; nil when the bridge shut down meanwhile.
    @discardableResult
    func register(npc: Bool = false, _ make: (String) -> AgentEntry) -> String? {
        state.withLock { state in
            state.creating -= 1
            guard !state.shutDown else { return nil }
            let id: String
            if npc {
                state.npcCount += 1
                id = "npc-\(state.npcCount)"
            } else {
                state.agentCount += 1
                id = "agent-\(state.agentCount)"
            }
            let entry = make(id)
            state.agents[id] = entry
            return id
        }
    }

    func runAgent(_ request: JSONRPCRequest, _ params: inout BridgeParams) throws(JSONRPCError) {
        let entry = try agent(&params)
        let prompt = try params.string("prompt")
        var policy = entry.agent.configuration.policy
        if var overrides = try params.optionalObject("policy") {
            policy = try AgentSpec.policy(&overrides, base: policy)
            try overrides.finish()
        }
        if let choice = params.raw("tool_choice") {
            policy.toolMode = try AgentSpec.toolMode(choice, field: params.field("tool_choice"))
        }
        if var schema = try params.optionalObject("schema") {
            policy.schema = try AgentSpec.schema(&schema)
            try schema.finish()
        }
        try params.finish()
        try startRun(request, agentID: entry.id) { entry.agent.run(prompt, policy: policy) }
    }

    /// Starts a run and answers `{"run_id"}` before its first event; the run's events then stream as `run.event`
    /// notifications. With `options`, the `completed` event carries the `decision` (or becomes `failed` when the
    /// answer chose something else).
    func startRun(
        _ request: JSONRPCRequest, agentID: String, field: String = "agent_id", options: [String]? = nil,
        _ start: () throws(AgentError) -> AgentRun
    ) throws(JSONRPCError) {
        try state.withLock { (state) throws(JSONRPCError) in
            // The agent may have closed since the request looked it up: agent.close cancels the runs it sees under
            // this lock, so a run registered after that would outlive its agent (and its MCP servers).
            guard state.agents[agentID] != nil else {
                throw .invalidParams(field, "no agent or NPC \"\(agentID)\" (closed, or never created)")
            }
            guard state.runs.count < configuration.maxRuns else {
                throw .bridge("limit_reached", "this bridge already has \(configuration.maxRuns) active runs; wait for some to end")
            }
            let run: AgentRun
            do throws(AgentError) {
                run = try start()
            } catch {
                throw JSONRPCError(error)
            }
            state.runCount += 1
            let id = "run-\(state.runCount)"
            reply(request, ["run_id": .string(id)])
            let task = Task { await self.forward(run, id: id, agentID: agentID, options: options) }
            state.runs[id] = RunEntry(agentID: agentID, run: run, task: task)
        }
    }

    /// Sends a run's events in order, then forgets the run.
    private func forward(_ run: AgentRun, id: String, agentID: String, options: [String]?) async {
        var sequence = 0
        var overflowed = false
        for await event in run {
            // After an overflow the run is cancelled and its last event sent: the rest is drained unsent.
            if overflowed { continue }
            var json = event.json
            if let options, case .completed(let response) = event {
                do {
                    let decision = try DecisionEngine.decision(from: response, options: options)
                    if case .object(var object) = json {
                        object["decision"] = decision.json
                        json = .object(object)
                    }
                } catch {
                    json = AgentEvent.failed(error).json
                }
            }
            let last: Bool
            switch event {
            case .completed, .failed: last = true
            default: last = false
            }
            func params(_ event: JSONValue) -> JSONValue {
                ["run_id": .string(id), "agent_id": .string(agentID), "seq": .number(JSONNumber(sequence)), "event": event]
            }
            if last { state.withLock { $0.runs[id]?.ended = true } }
            // A streaming event is droppable: a host that stops reading must not make the outbox grow without
            // limit. The run it would have grown is cancelled, and its last event (always sent) says why.
            if !notify("run.event", params(json), droppable: !last) {
                overflowed = true
                state.withLock { $0.runs[id]?.ended = true }
                run.cancel()
                let error = AgentError(
                    .busy,
                    "the host is not reading: \(outbox.queuedBytes) bytes of messages wait for it (limit \(outbox.maxQueuedBytes)); the run was cancelled")
                logger?.warning("\(id): \(error.message)")
                notify("run.event", params(AgentEvent.failed(error).json))
            }
            sequence += 1
        }
        _ = state.withLock { $0.runs.removeValue(forKey: id) }
    }

    func submitToolOutput(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let run = try activeRun(&params)
        let callID = try params.string("call_id")
        let output: AgentToolOutput
        switch params.raw("output") {
        case .string(let text)?:
            output = .text(text)
        case .object(let object)?:
            var fields = BridgeParams(object, path: params.field("output"))
            let text = try fields.optionalString("text", maxBytes: configuration.maxMessageBytes) ?? ""
            let isError = try fields.optionalBool("is_error") ?? false
            try fields.finish()
            output = AgentToolOutput(content: [.text(text)], isError: isError)
        case let other?:
            throw .invalidParams(params.field("output"), "must be a string or {\"text\",\"is_error\"}, not \(other.typeName)")
        case nil:
            throw .invalidParams(params.field("output"), "is required (a string, or {\"text\",\"is_error\"})")
        }
        try params.finish()
        // False when the call is not waiting: answered already, timed out, or its run ended.
        return ["accepted": .bool(run?.submit(output, for: callID) ?? false)]
    }

    func cancelRun(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let run = try activeRun(&params)
        try params.finish()
        run?.cancel()
        return ["cancelled": .bool(run != nil)]
    }

    func history(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let entry = try agent(&params)
        try params.finish()
        return ["items": .array(entry.agent.history), "turns": .number(JSONNumber(entry.agent.turnCount))]
    }

    func resetAgent(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let entry = try agent(&params)
        try params.finish()
        entry.agent.clearHistory()
        return [:]
    }

    func closeAgent(_ request: JSONRPCRequest, _ params: inout BridgeParams) throws(JSONRPCError) {
        let entry = try agent(&params)
        try params.finish()
        let runs = state.withLock { state in
            state.agents[entry.id] = nil
            return state.runs.values.filter { $0.agentID == entry.id }
        }
        spawn { [self] in
            for run in runs { run.run.cancel() }
            for run in runs { await run.task.value }
            await entry.close()
            reply(request, [:])
        }
    }

    /// The agent or NPC named by `agent_id` (or `key`).
    func agent(_ params: inout BridgeParams, key: String = "agent_id") throws(JSONRPCError) -> AgentEntry {
        let id = try params.string(key)
        guard let entry = state.withLock({ $0.agents[id] }) else {
            throw .invalidParams(params.field(key), "no agent or NPC \"\(id.prefix(100))\" (closed, or never created)")
        }
        return entry
    }

    /// The run named by `run_id`: nil when it already ended; an error when this bridge never started it.
    private func activeRun(_ params: inout BridgeParams) throws(JSONRPCError) -> AgentRun? {
        let id = try params.string("run_id")
        let (entry, count) = state.withLock { ($0.runs[id], $0.runCount) }
        if let entry, !entry.ended { return entry.run }
        guard id.hasPrefix("run-"), let number = Int(id.dropFirst(4)), number >= 1, number <= count else {
            throw .invalidParams(params.field("run_id"), "no run \"\(id.prefix(100))\" was started by this bridge")
        }
        return nil
    }
}
