// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMCore
import AFMGame
import AFMJSON
import AFMLogging
import Dispatch
import Synchronization

/// The bridge's one dispatcher: JSON-RPC 2.0 messages in, responses and `run.event` notifications out, for
/// every transport (`afm bridge` over stdio, `libafm-bridge.so` through its C ABI).
///
/// ```
/// receive(line) ─► JSONRPCRequest ─► method ─► result / error ─────────────────────► outbox (in order)
///                                     agent.run, npc.say, npc.decide ─► AgentRun ─► forward task ─► run.event …
/// shutdown() ─► refuse new work ─► cancel runs ─► their last events ─► close agents (MCP servers end)
/// ```
///
/// ``receive(_:)`` may be called from any thread, concurrently; it never waits for a model or for the host.
/// Answers to most methods are queued before `receive` returns; methods that wait (`agent.create` with MCP
/// servers, `agent.close`, `shutdown`) answer from a task when they are done. A run's id is always answered
/// before its first `run.event`.
public final class Bridge: Sendable {
    /// The protocol revision this bridge speaks (docs/bridge.md).
    public static let protocolVersion = "2026-12-01"
    /// Every revision it speaks, newest first.
    public static let supportedProtocolVersions = [protocolVersion]

    public let configuration: BridgeConfiguration
    let outbox: BridgeOutbox
    let logger: Logger?
    /// Called once the answer to `shutdown` is queued (`afm bridge` then exits), on a Dispatch thread of its own:
    /// it may call ``close()``.
    private let onShutdownRequest: @Sendable () -> Void
    let world = WorldState()
    let state = Mutex(State())

    /// An agent or NPC the host created.
    final class AgentEntry: Sendable {
        let id: String
        let agent: Agent
        let npc: NPC?
        /// What must be stopped when the agent closes (its MCP servers).
        let closers: [@Sendable () async -> Void]

        init(id: String, agent: Agent, npc: NPC? = nil, closers: [@Sendable () async -> Void] = []) {
            self.id = id
            self.agent = agent
            self.npc = npc
            self.closers = closers
        }

        func close() async {
            for close in closers { await close() }
        }
    }

    /// A run that has not sent its last event yet.
    struct RunEntry {
        let agentID: String
        let run: AgentRun
        /// Sends the run's events; ends after the last one.
        let task: Task<Void, Never>
        /// Its last event is being sent: `run.cancel` and `run.submitToolOutput` treat it as ended (a host that got
        /// the last event and cancels at once must hear `cancelled: false`), while shutdown still awaits `task`.
        var ended = false
    }

    struct State {
        var agents: [String: AgentEntry] = [:]
        var runs: [String: RunEntry] = [:]
        /// Agents being created (MCP servers starting); they count toward the agent limit.
        var creating = 0
        var agentCount = 0
        var npcCount = 0
        var runCount = 0
        var taskCount: UInt64 = 0
        /// Method tasks still working (agent.create with MCP servers, agent.close), awaited by shutdown.
        var tasks: [UInt64: Task<Void, Never>] = [:]
        var shutDown = false
        /// The one task of the `shutdown` requests: it shuts down, then answers every request that arrived meanwhile.
        /// Awaited by ``close()`` so its answers are delivered before the outbox finishes.
        var shutdownTask: Task<Void, Never>?
        /// The ids of the `shutdown` requests waiting for that task (a request without an id is a notification).
        var shutdownWaiting: [JSONRPCRequest] = []
        /// The shutdown task has answered: a later `shutdown` is answered at once.
        var shutdownAnswered = false
        /// ``close()`` began: a message from now on is refused (``receive(_:)`` returns false).
        var closing = false
        /// Calls of ``receive(_:)`` that are dispatching a message, which ``close()`` waits for.
        var receiving = 0
        /// Signalled by the last of them when a close waits.
        var receivesEnded: DispatchSemaphore?
    }

    /// A bridge that writes to `outbox`. `onShutdownRequest` runs after the answer to a `shutdown` request is queued.
    public init(
        configuration: BridgeConfiguration = BridgeConfiguration(), outbox: BridgeOutbox, logger: Logger? = nil,
        onShutdownRequest: @escaping @Sendable () -> Void = {}
    ) {
        self.configuration = configuration
        self.outbox = outbox
        self.logger = logger
        self.onShutdownRequest = onShutdownRequest
    }

    // MARK: - Messages in

    /// Handles one message (one line, without its newline). Blank lines are ignored; anything else is answered
    /// (unless it is a notification), with an error when it is not a valid request.
    ///
    /// - Returns: false when the bridge is closing or closed (``close()`` began): the message was not taken and will
    ///   get no answer (`afm_bridge_send` then answers `AFM_BRIDGE_ERR_CLOSED`). A message taken is answered before
    ///   ``close()`` ends: the close waits for every `receive` under way.
    @discardableResult
    public func receive(_ message: ArraySlice<UInt8>) -> Bool {
        let taken = state.withLock { state -> Bool in
            guard !state.closing else { return false }
            state.receiving += 1
            return true
        }
        guard taken else { return false }
        defer {
            let waiting = state.withLock { state -> DispatchSemaphore? in
                state.receiving -= 1
                guard state.receiving == 0 else { return nil }
                defer { state.receivesEnded = nil }
                return state.receivesEnded
            }
            waiting?.signal()
        }
        take(message)
        return true
    }

    private func take(_ message: ArraySlice<UInt8>) {
        if message.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        guard message.count <= configuration.maxMessageBytes else {
            logger?.warning("refused a message of \(message.count) bytes")
            send(error: .invalidRequest("the message has \(message.count) bytes; the limit is \(configuration.maxMessageBytes)"), id: .null)
            return
        }
        let request: JSONRPCRequest
        do {
            request = try JSONRPCRequest(message: message)
        } catch {
            logger?.debug("bad message: \(error.error.message)")
            if error.answer { send(error: error.error, id: error.id) }
            return
        }
        dispatch(request)
    }

    /// Handles one message given as text; false when the bridge is closing or closed.
    @discardableResult
    public func receive(_ message: String) -> Bool {
        receive(Array(message.utf8)[...])
    }

    private func dispatch(_ request: JSONRPCRequest) {
        do throws(JSONRPCError) {
            if request.method != "shutdown", state.withLock({ $0.shutDown }) {
                throw JSONRPCError.bridge("shut_down", "the bridge is shutting down")
            }
            var params = BridgeParams(request.params)
            switch request.method {
            case "initialize": reply(request, try initialize(&params))
            case "ping":
                try params.finish()
                reply(request, [:])
            case "agent.create": try createAgent(request, &params)
            case "agent.run": try runAgent(request, &params)
            case "agent.history": reply(request, try history(&params))
            case "agent.reset": reply(request, try resetAgent(&params))
            case "agent.close": try closeAgent(request, &params)
            case "run.submitToolOutput": reply(request, try submitToolOutput(&params))
            case "run.cancel": reply(request, try cancelRun(&params))
            case "npc.create": try createNPC(request, &params)
            case "npc.say": try say(request, &params)
            case "npc.decide": try decide(request, &params)
            case "world.set": reply(request, try setWorld(&params))
            case "world.patch": reply(request, try patchWorld(&params))
            case "world.get": reply(request, try getWorld(&params))
            case "shutdown":
                try params.finish()
                // Refuse what follows at once (the next line may already be read); one task does the rest for every
                // `shutdown` request (a host that repeats it must not add a task each), and one that comes after it
                // answered is answered here.
                let answerNow = state.withLock { state -> Bool in
                    state.shutDown = true
                    if state.shutdownAnswered { return true }
                    state.shutdownWaiting.append(request)
                    if state.shutdownTask == nil {
                        state.shutdownTask = Task {
                            await self.shutdown()
                            let waiting = self.state.withLock { state in
                                state.shutdownAnswered = true
                                defer { state.shutdownWaiting = [] }
                                return state.shutdownWaiting
                            }
                            for request in waiting { self.reply(request, [:]) }
                            self.shutdownAnswered()
                        }
                    }
                    return false
                }
                if answerNow {
                    reply(request, [:])
                    shutdownAnswered()
                }
            default: throw JSONRPCError.methodNotFound(request.method)
            }
        } catch {
            reply(request, error: error)
        }
    }

    /// Runs `onShutdownRequest` off the task that answered and off the cooperative pool: it may call ``close()``,
    /// which blocks its thread until the shutdown task ended (on that task it waited for itself).
    private func shutdownAnswered() {
        let onShutdownRequest = self.onShutdownRequest
        DispatchQueue.global().async { onShutdownRequest() }
    }

    // MARK: - Messages out

    func reply(_ request: JSONRPCRequest, _ result: JSONValue) {
        guard let id = request.id else { return }
        outbox.send(["jsonrpc": "2.0", "id": id, "result": result])
    }

    func reply(_ request: JSONRPCRequest, error: JSONRPCError) {
        guard let id = request.id else { return }
        send(error: error, id: id)
    }

    private func send(error: JSONRPCError, id: JSONValue) {
        outbox.send(["jsonrpc": "2.0", "id": id, "error": error.json])
    }

    /// False when the outbox refused a `droppable` notification (the host is not reading; see ``BridgeOutbox``).
    @discardableResult
    func notify(_ method: String, _ params: JSONValue, droppable: Bool = false) -> Bool {
        outbox.send(["jsonrpc": "2.0", "method": .string(method), "params": params], droppable: droppable)
    }

    // MARK: - Lifecycle

    private func initialize(_ params: inout BridgeParams) throws(JSONRPCError) -> JSONValue {
        let requested = try params.optionalString("protocol_version", maxBytes: 64)
        if let info = try params.optionalObject("client_info") {
            var info = info
            let name = try info.optionalString("name", maxBytes: 200)
            let version = try info.optionalString("version", maxBytes: 200)
            try info.finish()
            logger?.info("host \(name ?? "?") \(version ?? "")")
        }
        _ = params.raw("capabilities")
        try params.finish()
        // As MCP: the requested revision when spoken, else the newest; the host decides whether it can go on.
        let version = requested.flatMap { Self.supportedProtocolVersions.contains($0) ? $0 : nil } ?? Self.protocolVersion
        return [
            "protocol_version": .string(version),
            "server_info": ["name": "afm-bridge", "version": .string(AFMVersion.string)],
            "capabilities": [
                "external_tools": true, "mcp_servers": true, "schema_turns": true, "npcs": true,
                "world": true,
            ],
            "defaults": ["url": .string(configuration.url.description), "model": .string(configuration.model)],
            "methods": .array(Self.methods.map(JSONValue.string)),
        ]
    }

    /// Every method, in the order docs/bridge.md documents them.
    public static let methods = [
        "initialize", "ping", "agent.create", "agent.run", "run.submitToolOutput", "run.cancel", "agent.history",
        "agent.reset", "agent.close", "npc.create", "npc.say", "npc.decide", "world.set", "world.patch", "world.get",
        "shutdown",
    ]

    /// Ends everything: new requests are refused (`shut_down`), every run is cancelled and sends its last event,
    /// method tasks end, every agent closes (its MCP servers stop). Idempotent; returns when all of it is done.
    public func shutdown() async {
        let (runs, agents) = state.withLock { state in
            state.shutDown = true
            defer { state.agents = [:] }
            return (Array(state.runs.values), Array(state.agents.values))
        }
        for entry in runs { entry.run.cancel() }
        for entry in runs { await entry.task.value }
        while let task = state.withLock({ $0.tasks.first?.value }) { await task.value }
        for agent in agents { await agent.close() }
        // Runs that started while the first ones ended (none can: new work is refused) are awaited too.
        while let entry = state.withLock({ $0.runs.first?.value }) {
            entry.run.cancel()
            await entry.task.value
        }
    }

    /// ``shutdown()`` for a host thread (never one of Swift's cooperative pool, which it blocks): returns when every
    /// run and agent has ended and the outbox has delivered what was queued and stopped its thread. What the stdio
    /// bridge does at the end of its input and `afm_bridge_close` does. From its start, ``receive(_:)`` refuses
    /// messages (returns false); a message it took before is answered first. Safe from `onShutdownRequest`.
    public func close() {
        let receivesEnded = state.withLock { state -> DispatchSemaphore? in
            state.closing = true
            guard state.receiving > 0 else { return nil }
            if state.receivesEnded == nil { state.receivesEnded = DispatchSemaphore(value: 0) }
            return state.receivesEnded
        }
        // A message being dispatched on another thread (`afm_bridge_send` racing `afm_bridge_close`) queues its answer,
        // or starts the task that will, before the shutdown below looks; dispatch never waits, so this is short.
        if let receivesEnded {
            receivesEnded.wait()
            receivesEnded.signal()  // for a second close waiting on it
        }
        let done = DispatchSemaphore(value: 0)
        Task {
            await shutdown()
            // The answers of `shutdown` requests are queued by their task: without this wait, input that ends right
            // after one (a host that sends `shutdown` and closes) could finish the outbox first and lose the answer.
            if let task = state.withLock({ $0.shutdownTask }) { await task.value }
            done.signal()
        }
        done.wait()
        outbox.finish()
    }

    /// Runs `body` as a method task that ``shutdown()`` waits for.
    func spawn(_ body: @escaping @Sendable () async -> Void) {
        state.withLock { state in
            state.taskCount += 1
            let key = state.taskCount
            state.tasks[key] = Task {
                await body()
                _ = self.state.withLock { $0.tasks.removeValue(forKey: key) }
            }
        }
    }
}
