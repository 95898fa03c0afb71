// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMClient
import AFMJSON
import AFMTestSupport
import Dispatch
import Foundation
import Synchronization
import Testing

@testable import AFMBridge

/// How a bridge run ends when something goes wrong after it started, against a real afmd serving the real scripted
/// backend: a decision that chose something not offered (the turn rolls back), a host that stops reading (the run
/// is cancelled with `busy` instead of the outbox growing).
@Suite(.serialized)
struct BridgeRunEndTests {
    /// A real afmd with the scripted backend serving `models` (id → model JSON: steps, or {capabilities, steps}).
    static func gateway(_ models: [(id: String, model: String)]) throws -> DaemonProcess {
        let directory = BackendDirectoryBuilder()
        try directory.addScripted()
        let root = TestPaths.makeTemporaryDirectory("afm-bridge-script")
        let scriptPath = root + "/script.json"
        let entries = models.map { model -> String in
            // A model given as an object carries its capabilities; a list is its steps.
            let body = model.model.hasPrefix("{") ? String(model.model.dropFirst().dropLast()) : #""steps":\#(model.model)"#
            return #"{"id":"\#(model.id)","context_tokens":8192,\#(body)}"#
        }
        try #"{"script_version":1,"models":[\#(entries.joined(separator: ","))]}"#.write(
            toFile: scriptPath, atomically: true, encoding: .utf8)
        return try DaemonProcess(backendDirectory: directory.path, config: "[Backend.scripted]\nScript=\(scriptPath)\n")
    }

    /// The messages a host received, parsed.
    final class Received: Sendable {
        let messages = Mutex<[JSONValue]>([])

        func add(_ bytes: [UInt8]) {
            let value = (try? JSONParser.parse(bytes)) ?? .null
            messages.withLock { $0.append(value) }
        }

        func result(id: Int) -> JSONValue? {
            messages.withLock { $0.first { $0["id"] == .number(JSONNumber(id)) }?["result"] }
        }

        /// The events of one run, in order.
        func events(run: String) -> [JSONValue] {
            messages.withLock { messages in
                messages.filter { $0["method"] == "run.event" && $0["params"]?["run_id"] == .string(run) }
                    .compactMap { $0["params"]?["event"] }
            }
        }
    }

    static let structured = #"{"streaming":true,"tools":true,"vision":false,"reasoning":false,"structured_output":true}"#

    @Test func aDecisionThatChoseSomethingElseFailsAndIsNotRemembered() throws {
        let daemon = try Self.gateway([
            ("rogue", #"{"capabilities":\#(Self.structured),"steps":[{"json":{"text":"{\"reasoning\":\"Fire!\",\"choice\":\"burn it\"}"}}]}"#)
        ])
        defer { daemon.stop() }
        let received = Received()
        let outbox = try BridgeOutbox { bytes in
            received.add(bytes)
            return true
        }
        let bridge = Bridge(
            configuration: BridgeConfiguration(url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "rogue"),
            outbox: outbox)
        defer { bridge.close() }
        bridge.receive(#"{"jsonrpc":"2.0","id":1,"method":"npc.create","params":{"persona":{"name":"Vex"}}}"#)
        #expect(waitUntil { received.result(id: 1) != nil })
        let npc = try #require(received.result(id: 1)?["npc_id"]?.stringValue)
        bridge.receive(
            #"{"jsonrpc":"2.0","id":2,"method":"npc.decide","params":{"npc_id":"\#(npc)","options":["open the gate","ignore it"]}}"#)
        #expect(waitUntil { received.result(id: 2) != nil })
        let run = try #require(received.result(id: 2)?["run_id"]?.stringValue)
        #expect(waitUntil { received.events(run: run).last?["type"] == "failed" })
        let end = try #require(received.events(run: run).last)
        #expect(end["error"]?["code"] == "invalid_schema", "\(end)")
        // The failed turn rolled back (agents.md §1.7): the NPC remembers nothing of it.
        bridge.receive(#"{"jsonrpc":"2.0","id":3,"method":"agent.history","params":{"agent_id":"\#(npc)"}}"#)
        #expect(waitUntil { received.result(id: 3) != nil })
        #expect(received.result(id: 3) == ["items": [], "turns": 0])
    }

    @Test func aHostThatStopsReadingGetsItsRunCancelledWithBusyNotAnEndlessQueue() throws {
        // 400 streamed words, then the model waits until cancelled: far more than the outbox's 4 KiB.
        let words = Array(repeating: #"{"text":"word "}"#, count: 400).joined(separator: ",")
        let daemon = try Self.gateway([("talker", "[\(words),{\"hang\":true}]")])
        defer { daemon.stop() }
        let received = Received()
        let reading = DispatchSemaphore(value: 0)
        let cap = 4096
        let outbox = try BridgeOutbox(maxQueuedBytes: cap) { bytes in
            // The host reads nothing until the test lets it, then everything.
            reading.wait()
            reading.signal()
            received.add(bytes)
            return true
        }
        let bridge = Bridge(
            configuration: BridgeConfiguration(url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "talker"),
            outbox: outbox)
        bridge.receive(#"{"jsonrpc":"2.0","id":1,"method":"agent.create","params":{}}"#)
        bridge.receive(#"{"jsonrpc":"2.0","id":2,"method":"agent.run","params":{"agent_id":"agent-1","prompt":"Talk."}}"#)
        // Without a bound the run would stream into memory until it hangs; with it, the run ends by itself.
        #expect(waitUntil(seconds: 30) { bridge.state.withLock { $0.runs.isEmpty } && outbox.queuedBytes > 0 })
        #expect(outbox.queuedBytes <= cap + 1024)
        reading.signal()
        bridge.close()
        #expect(received.result(id: 2)?["run_id"] == "run-1")
        let events = received.events(run: "run-1")
        let end = try #require(events.last)
        #expect(end["type"] == "failed" && end["error"]?["code"] == "busy", "\(end)")
        #expect(end["error"]?["message"]?.stringValue?.contains("not reading") == true)
        #expect(events.count < 400)
    }

    /// `shutdown` refuses what follows it at once: a request right behind it (the next line on stdin) is answered
    /// `shut_down` instead of being served while the shutdown task has yet to start.
    @Test func aRequestRightAfterShutdownIsRefused() throws {
        var served = 0
        for _ in 1...200 {
            let received = Received()
            let outbox = try BridgeOutbox { bytes in
                received.add(bytes)
                return true
            }
            let bridge = Bridge(
                configuration: BridgeConfiguration(url: ServerURL(host: "127.0.0.1", port: 9, pathPrefix: ""), model: "m"),
                outbox: outbox)
            bridge.receive(#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#)
            bridge.receive(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#)
            #expect(waitUntil { received.result(id: 1) != nil && received.messages.withLock { $0.count } >= 2 })
            let answer = received.messages.withLock { $0.first { $0["id"] == 2 } }
            if answer?["error"]?["data"]?["code"] != "shut_down" { served += 1 }
            outbox.finish()
        }
        #expect(served == 0, "\(served) of 200 requests sent right after shutdown were served")
    }

    @Test func aRunStartedWhileItsAgentClosesNeverOutlivesTheClose() throws {
        let daemon = try Self.gateway([("stall", #"[{"text":"Thinking"},{"hang":true}]"#)])
        defer { daemon.stop() }
        let received = Received()
        let outbox = try BridgeOutbox { bytes in
            received.add(bytes)
            return true
        }
        let bridge = Bridge(
            configuration: BridgeConfiguration(url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "stall"),
            outbox: outbox)
        // A long prompt widens the time between the run's agent look-up and its registration.
        let prompt = String(repeating: "p", count: 1 << 20)
        var escaped: [String] = []
        for round in 1...30 {
            bridge.receive(#"{"jsonrpc":"2.0","id":\#(1000 + round),"method":"agent.create","params":{}}"#)
            #expect(waitUntil { received.result(id: 1000 + round) != nil })
            let agent = "agent-\(round)"
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) {
                bridge.receive(
                    #"{"jsonrpc":"2.0","id":\#(2000 + round),"method":"agent.run","params":{"agent_id":"\#(agent)","prompt":"\#(prompt)"}}"#)
            }
            DispatchQueue.global().async(group: group) {
                usleep(UInt32(round * 20))
                bridge.receive(#"{"jsonrpc":"2.0","id":\#(3000 + round),"method":"agent.close","params":{"agent_id":"\#(agent)"}}"#)
            }
            group.wait()
            #expect(waitUntil { received.result(id: 3000 + round) != nil })
            // Once agent.close answered, no run of that agent may still be going (its MCP servers are gone).
            if bridge.state.withLock({ $0.runs.values.contains { $0.agentID == agent } }) { escaped.append(agent) }
        }
        #expect(escaped.isEmpty, "runs outlived their agent's close: \(escaped)")
        bridge.close()
    }

    /// `Agent.run(accept:)` itself: an answer the check refuses fails the turn with the check's error and leaves the
    /// history as it was; the same answer unchecked is remembered. (The gateway's own structured-output check now
    /// refuses a choice outside the schema's `enum` before the bridge sees it, so the NPC test above also passes
    /// without this check; a gateway that does not validate reaches it.) Failed before the fix: the turn completed.
    @Test func anAnswerTheAcceptanceCheckRefusesFailsTheTurnAndIsNotRemembered() async throws {
        let daemon = try Self.gateway([("plain", #"[{"text":"Burn it."}]"#)])
        defer { daemon.stop() }
        let agent = Agent(configuration: .init(url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "plain"))
        let refused = agent.run("What now?", accept: { response throws(AgentError) in
            throw AgentError(.invalidSchema, "refused: \(response.text)")
        })
        do {
            let response = try await refused.response()
            Issue.record("a refused answer completed the turn: \(response.text)")
        } catch {
            #expect(error.code == .invalidSchema && error.message == "refused: Burn it.", "\(error)")
        }
        #expect(agent.history.isEmpty, "\(agent.history)")
        let accepted = try await agent.run("What now?", accept: { _ throws(AgentError) in }).response()
        #expect(accepted.text == "Burn it.")
        #expect(agent.history.count == 2)
    }

    /// The close race made deterministic: a run whose agent was looked up before `agent.close` removed it reaches
    /// `startRun` after the close; it must be refused (-32602 naming agent_id), not registered to outlive the agent.
    /// Failed before the fix: the run was registered (and answered a run_id).
    @Test func aRunRegisteredAfterItsAgentClosedIsRefused() throws {
        let daemon = try Self.gateway([("stall", #"[{"text":"Thinking"},{"hang":true}]"#)])
        defer { daemon.stop() }
        let received = Received()
        let outbox = try BridgeOutbox { bytes in
            received.add(bytes)
            return true
        }
        let bridge = Bridge(
            configuration: BridgeConfiguration(url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "stall"),
            outbox: outbox)
        defer { bridge.close() }
        bridge.receive(#"{"jsonrpc":"2.0","id":1,"method":"agent.create","params":{}}"#)
        #expect(waitUntil { received.result(id: 1) != nil })
        // What agent.run looked up before the close ran.
        let entry = try #require(bridge.state.withLock { $0.agents["agent-1"] })
        bridge.receive(#"{"jsonrpc":"2.0","id":2,"method":"agent.close","params":{"agent_id":"agent-1"}}"#)
        #expect(waitUntil { received.result(id: 2) != nil })
        let request = try JSONRPCRequest(
            message: Array(#"{"jsonrpc":"2.0","id":3,"method":"agent.run","params":{"agent_id":"agent-1","prompt":"Hi"}}"#.utf8)[...])
        var refusal: JSONRPCError?
        do throws(JSONRPCError) {
            try bridge.startRun(request, agentID: entry.id) { entry.agent.run("Hi") }
        } catch {
            refusal = error
        }
        #expect(refusal?.code == -32602, "\(String(describing: refusal))")
        #expect(refusal?.json["data"]?["field"] == "agent_id", "\(String(describing: refusal?.json))")
        #expect(bridge.state.withLock { $0.runs.isEmpty }, "a run was registered for a closed agent")
        #expect(received.result(id: 3) == nil)
    }
}
