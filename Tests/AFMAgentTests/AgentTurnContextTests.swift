// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import Synchronization
import Testing

/// `turnContext` (text for one turn's instructions, asked when the turn starts, never in the history) and
/// `historyLimit` (the last N complete turns kept), against the real scripted backend.
struct AgentTurnContextTests {
    @Test func theContextOfEachTurnIsAskedAtItsStartAndNeverKept() async throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"text":"noted"}]"#)])
        let revision = Mutex(0)
        let agent = Agent(
            configuration: .init(
                url: gateway.url, model: "m", instructions: "Be brief.",
                turnContext: { "world revision \(revision.withLock { $0 += 1; return $0 })" }, historyLimit: 2))
        for prompt in ["one", "two", "three", "four"] { _ = try await agent.run(prompt).response() }
        let systems = gateway.requests().map { ($0["system"]?.arrayValue ?? []).compactMap(\.stringValue).joined(separator: "\n") }
        #expect(systems.count == 4)
        for (index, system) in systems.enumerated() {
            #expect(system.contains("Be brief.") && system.contains("world revision \(index + 1)"), "\(system)")
        }
        // The history keeps the last two turns, and no context.
        #expect(agent.turnCount == 2)
        let history = JSONValue.array(agent.history).jsonString
        #expect(!history.contains("world revision") && !history.contains("\"one\"") && history.contains("four"))
        #expect(gateway.requests().last?.userTexts == ["two", "three", "four"])
    }
}
