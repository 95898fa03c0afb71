// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import Foundation
import Synchronization
import Testing

/// The step controller and the tool runtime against the real scripted backend, which records every request: which
/// tools each step offered and with which tool mode, what the model saw, what the history kept.
@Suite(.serialized)
struct AgentSteeringTests {
    static let parameters: JSONValue = ["type": "object", "properties": ["key": ["type": "string"]], "required": ["key"]]

    /// A model that calls `lookup` whenever it is offered a tool, and answers "done" otherwise.
    static let callsWheneverOffered =
        #"[{"if_tools_offered":true,"then":[{"tool_call":{"name":"lookup","arguments":"{\"key\":\"a\"}"}}],"else":[{"text":"done"}]}]"#
    /// A model that calls `lookup` until an output comes back, then answers.
    static let callsOnce =
        #"[{"if_input_has":"function_call_output","then":[{"text":"answered"}],"else":[{"tool_call":{"name":"lookup","arguments":"{\"key\":\"a\"}"}}]}]"#

    /// Counts calls across tasks.
    final class Counter: Sendable {
        private let value = Mutex(0)
        func increment() { value.withLock { $0 += 1 } }
        var count: Int { value.withLock { $0 } }
    }

    static func lookup(_ calls: Counter? = nil) -> AgentTool {
        .local(name: "lookup", description: "Looks a key up.", parameters: parameters) { arguments in
            calls?.increment()
            return .text("value of \(arguments["key"]?.stringValue ?? "?")")
        }
    }

    static let clock = AgentTool.local(
        name: "clock", description: "Tells the time.", parameters: ["type": "object", "properties": [:]]
    ) { _ in .text("noon") }

    static func agent(_ gateway: ScriptedGateway, model: String, tools: [AgentTool], policy: TurnPolicy = TurnPolicy()) -> Agent {
        Agent(configuration: .init(url: gateway.url, model: model, instructions: "Be brief.", tools: tools, policy: policy))
    }

    /// Polls `condition` every 20 ms for up to 10 s (for what another process does).
    static func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    /// Collects a run's events.
    static func events(of run: AgentRun) async -> [AgentEvent] {
        var events: [AgentEvent] = []
        for await event in run { events.append(event) }
        return events
    }

    @Test func autoOffersEveryToolOnEveryStep() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsOnce)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup(), Self.clock])
        let response = try await agent.run("What is a?").response()
        #expect(response.text == "answered")
        #expect(response.steps == 2)
        let requests = gateway.requests()
        #expect(requests.map(\.offeredTools) == [["lookup", "clock"], ["lookup", "clock"]])
        #expect(requests.map(\.toolMode) == ["auto", "auto"])
        #expect(requests[1].inputTypes == ["message", "function_call", "function_call_output"])
        #expect(response.toolCalls.map(\.output.text) == ["value of a"])
    }

    /// A call of a tool the agent does not have (a misspelt name) gets an "unknown tool" output naming the tools, and
    /// the turn goes on (docs/agents.md). Failed while afmd failed such a response (6fb1c55): the turn threw.
    @Test func anUnknownToolCallGetsAnErrorOutputAndTheTurnGoesOn() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"done"}],"else":[{"tool_call":{"name":"lokup","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let calls = Counter()
        let response = try await Self.agent(gateway, model: "m", tools: [Self.lookup(calls)]).run("Look a up.").response()
        #expect(response.text == "done")
        #expect(calls.count == 0)
        #expect(response.toolCalls.first?.output.text.contains("unknown tool \"lokup\"") == true, "\(response.toolCalls)")
        #expect(response.toolCalls.first?.output.text.contains("lookup") == true)
    }

    /// A call of a tool the step withheld (tool mode none), which a backend that passes calls through may return,
    /// does not run: it gets the "unknown tool" output. Before, the agent ran any of its tools the model named.
    @Test func aToolTheStepWithheldDoesNotRun() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"done"}],"else":[{"tool_call":{"name":"lookup","arguments":"{\"key\":\"a\"}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let calls = Counter()
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup(calls)])
        let response = try await agent.run("Hi", policy: TurnPolicy(toolMode: .none)).response()
        #expect(calls.count == 0)
        #expect(response.toolCalls.first?.output.text.contains("unknown tool \"lookup\"") == true, "\(response.toolCalls)")
    }

    @Test func noneRemovesTheToolsFromTheRequest() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsWheneverOffered)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup(), Self.clock])
        let response = try await agent.run("Hi", policy: TurnPolicy(toolMode: .none)).response()
        #expect(response.text == "done")
        let requests = gateway.requests()
        #expect(requests.count == 1)
        #expect(requests[0].offeredTools == [])
        #expect(requests[0]["tools"] == [])
    }

    @Test func requiredForcesTheFirstStepOnly() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsOnce)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup(), Self.clock])
        let response = try await agent.run("Hi", policy: TurnPolicy(toolMode: .required)).response()
        #expect(response.text == "answered")
        let requests = gateway.requests()
        #expect(requests.map(\.toolMode) == ["required", "auto"])
        #expect(requests.map(\.offeredTools) == [["lookup", "clock"], ["lookup", "clock"]])
    }

    @Test func aNamedToolNarrowsTheFirstStep() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsOnce)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.clock, Self.lookup()])
        _ = try await agent.run("Hi", policy: TurnPolicy(toolMode: .named("lookup"))).response()
        let requests = gateway.requests()
        #expect(requests.map(\.offeredTools) == [["lookup"], ["clock", "lookup"]])
        #expect(requests.map(\.toolMode) == ["function", "auto"])
        #expect(requests[0]["tool_choice"]?["name"] == "lookup")
    }

    @Test func aBudgetOfTwoCallsRemovesTheToolsOnceSpent() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsWheneverOffered)])
        let calls = Counter()
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup(calls)])
        let response = try await agent.run("Hi", policy: TurnPolicy(maxToolCalls: 2)).response()
        #expect(response.text == "done")
        #expect(response.steps == 3)
        #expect(calls.count == 2)
        let requests = gateway.requests()
        #expect(requests.map(\.offeredTools) == [["lookup"], ["lookup"], []])
        #expect(requests.map { $0.inputTypes.filter { $0 == "function_call_output" }.count } == [0, 1, 2])
    }

    @Test func callsOverTheBudgetGetAnErrorOutput() async throws {
        let twoCalls =
            #"[{"if_input_has":"function_call_output","then":[{"text":"ok"}],"else":[{"tool_call":{"name":"lookup","arguments":"{\"key\":\"a\"}"}},{"tool_call":{"name":"lookup","arguments":"{\"key\":\"b\"}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", twoCalls)])
        let calls = Counter()
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup(calls)])
        let response = try await agent.run("Hi", policy: TurnPolicy(maxToolCalls: 1)).response()
        #expect(calls.count == 1)
        #expect(response.toolCalls.map(\.output.isError) == [false, true])
        #expect(response.toolCalls[1].output.text.contains("budget"))
        #expect(gateway.requests()[1].offeredTools == [])
    }

    @Test func parallelCallsOfOneStepRunConcurrently() async throws {
        let twoCalls =
            #"[{"if_input_has":"function_call_output","then":[{"text":"ok"}],"else":[{"tool_call":{"name":"meet","arguments":"{\"key\":\"a\"}"}},{"tool_call":{"name":"meet","arguments":"{\"key\":\"b\"}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", twoCalls)])
        // Each call waits until both have started: only calls that run at the same time can both finish in time.
        let started = Counter()
        let meet = AgentTool.local(name: "meet", description: "Meets.", parameters: Self.parameters, timeout: .seconds(20)) { arguments in
            started.increment()
            while started.count < 2 { try await Task.sleep(for: .milliseconds(10)) }
            return .text("met \(arguments["key"]?.stringValue ?? "")")
        }
        let agent = Self.agent(gateway, model: "m", tools: [meet])
        let response = try await agent.run("Hi").response()
        #expect(response.toolCalls.map(\.output) == [.text("met a"), .text("met b")])
        let outputs = gateway.requests()[1]["input"]?.arrayValue?.filter { $0["type"] == "function_call_output" } ?? []
        #expect(outputs.map { $0["output"]?.stringValue } == ["met a", "met b"])
    }

    @Test func aRunawayLoopEndsAtMaxSteps() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsWheneverOffered)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup()])
        let run = agent.run("Hi", policy: TurnPolicy(maxSteps: 3))
        let events = await Self.events(of: run)
        guard case .failed(let error)? = events.last else {
            Issue.record("the turn did not fail: \(events)")
            return
        }
        #expect(error.code == .generationFailed)
        #expect(error.message.contains("3 model steps"))
        #expect(gateway.requests().count == 3)
        #expect(agent.turnCount == 0)
    }

    @Test func theDefaultMaxStepsIsTen() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsWheneverOffered)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup()])
        do {
            _ = try await agent.run("Hi").response()
            Issue.record("a runaway loop answered")
        } catch {
            #expect(error.code == .generationFailed)
        }
        #expect(gateway.requests().count == 10)
    }

    @Test func aFailingStepRollsTheTranscriptBack() async throws {
        let failsAfterTool =
            #"[{"if_input_has":"function_call_output","then":[{"error":{"code":"rate_limited","message":"slow down"}}],"else":[{"tool_call":{"name":"lookup","arguments":"{\"key\":\"a\"}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("ok", #"[{"text":"fine"}]"#), ("bad", failsAfterTool)])
        let first = Self.agent(gateway, model: "ok", tools: [Self.lookup()])
        _ = try await first.run("first").response()
        #expect(first.turnCount == 1)
        let history = first.history
        // The same history, now against a model whose second step fails.
        let agent = Agent(configuration: .init(url: gateway.url, model: "bad", tools: [Self.lookup()]))
        _ = try? await agent.run("warm-up", policy: TurnPolicy(toolMode: .none)).response()
        let before = agent.history
        let run = agent.run("second")
        let events = await Self.events(of: run)
        guard case .failed(let error)? = events.last else {
            Issue.record("the turn did not fail: \(events)")
            return
        }
        #expect(error.code == .rateLimited)
        #expect(error.gatewayCode == "rate_limited")
        #expect(agent.history == before)
        #expect(events.contains { if case .toolCallCompleted = $0 { true } else { false } })
        #expect(history.count == 2)
        // The next turn sends the history without any item of the failed turn.
        _ = try? await agent.run("third", policy: TurnPolicy(toolMode: .none)).response()
        let last = try #require(gateway.requests(model: "bad").last)
        #expect(!last.userTexts.contains("second"))
        #expect(last.userTexts.last == "third")
    }

    @Test func cancelMidTurnRollsBackAndReportsCancelled() async throws {
        let hangsAfterTool =
            #"[{"if_input_has":"function_call_output","then":[{"text":"partial"},{"hang":true}],"else":[{"tool_call":{"name":"lookup","arguments":"{\"key\":\"a\"}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", hangsAfterTool)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup()])
        let run = agent.run("Hi")
        var events: [AgentEvent] = []
        for await event in run {
            events.append(event)
            if case .text = event { run.cancel() }
        }
        guard case .failed(let error)? = events.last else {
            Issue.record("the turn did not fail: \(events)")
            return
        }
        #expect(error.code == .cancelled)
        #expect(error.code.exitStatus == 130)
        #expect(agent.turnCount == 0)
        #expect(agent.history.isEmpty)
        // The gateway saw the disconnect and cancelled the hanging generation.
        #expect(await Self.eventually { gateway.records.contains(#""kind":"done","reason":"cancelled""#) }, "\(gateway.records)")
    }

    @Test func anExternalToolSubmittedAfterThreeSeconds() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsOnce.replacingOccurrences(of: "lookup", with: "open_door"))])
        let door = AgentTool.external(name: "open_door", description: "Opens the door.", parameters: Self.parameters)
        let agent = Self.agent(gateway, model: "m", tools: [door])
        let run = agent.run("Open it")
        var requested: AgentToolCall?
        var completed: ToolCallRecord?
        for await event in run {
            switch event {
            case .toolCallRequested(let call):
                requested = call
                try await Task.sleep(for: .seconds(3))
                #expect(run.submit(.text("the door is open"), for: call.callID))
                #expect(!run.submit(.text("twice"), for: call.callID))
            case .toolCallCompleted(let record): completed = record
            default: break
            }
        }
        let response = try await run.response()
        #expect(response.text == "answered")
        #expect(requested?.name == "open_door")
        #expect(completed?.isExternal == true)
        #expect(completed?.output == .text("the door is open"))
        #expect((completed?.durationMilliseconds ?? 0) >= 3000)
        let output = gateway.requests()[1]["input"]?.arrayValue?.last
        #expect(output?["output"] == "the door is open")
        #expect(output?["call_id"]?.stringValue == requested?.callID)
    }

    @Test func anExternalToolThatIsNeverAnsweredTimesOut() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsOnce.replacingOccurrences(of: "lookup", with: "roll_dice"))])
        let dice = AgentTool.external(name: "roll_dice", description: "Rolls.", parameters: Self.parameters)
        let agent = Self.agent(gateway, model: "m", tools: [dice], policy: TurnPolicy(externalToolTimeout: .milliseconds(500)))
        let response = try await agent.run("Roll").response()
        #expect(response.text == "answered")
        let record = try #require(response.toolCalls.first)
        #expect(record.output.isError)
        #expect(record.output.text.contains("did not answer"))
    }

    @Test func aLocalToolThatHangsTimesOutAndOneThatThrowsFails() async throws {
        let twoCalls =
            #"[{"if_input_has":"function_call_output","then":[{"text":"ok"}],"else":[{"tool_call":{"name":"slow","arguments":"{}"}},{"tool_call":{"name":"broken","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", twoCalls)])
        struct Broken: Error, CustomStringConvertible { var description: String { "disk on fire" } }
        let slow = AgentTool.local(name: "slow", description: "Slow.", parameters: ["type": "object", "properties": [:]]) { _ in
            try await Task.sleep(for: .seconds(60))
            return .text("late")
        }
        let broken = AgentTool.local(name: "broken", description: "Broken.", parameters: ["type": "object", "properties": [:]]) { _ in
            throw Broken()
        }
        let agent = Self.agent(gateway, model: "m", tools: [slow, broken], policy: TurnPolicy(toolTimeout: .milliseconds(300)))
        let response = try await agent.run("Go").response()
        #expect(response.text == "ok")
        #expect(response.toolCalls.map(\.output.isError) == [true, true])
        #expect(response.toolCalls[0].output.text.contains("timed out"))
        #expect(response.toolCalls[1].output.text.contains("disk on fire"))
    }

    @Test func trimmingDropsTheOldestTurnsAndNeverThePrompt() async throws {
        // 200 input tokens; every prompt is ~100 bytes (≈ 38 estimated tokens with its item).
        let gateway = try ScriptedGateway(models: [("m", #"[{"text":"ok"}]"#)], contextTokens: 400, maxInputTokens: 200)
        let agent = Self.agent(gateway, model: "m", tools: [])
        var trimmed: [Int] = []
        for index in 1...8 {
            let prompt = "turn \(index): " + String(repeating: "x", count: 90)
            trimmed.append(try await agent.run(prompt).response().trimmedTurns)
        }
        #expect(agent.turnCount == 8)
        #expect(agent.history.count == 16)
        let requests = gateway.requests()
        #expect(requests.count == 8)
        #expect(trimmed.first == 0)
        #expect((trimmed.last ?? 0) > 0)
        for (index, request) in requests.enumerated() {
            let texts = request.userTexts
            // The prompt is always there, last; what precedes it are the newest turns, in order.
            #expect(texts.last?.hasPrefix("turn \(index + 1):") == true)
            let numbers = texts.compactMap { Int($0.dropFirst(5).prefix { $0.isNumber }) }
            #expect(numbers == Array((index + 2 - numbers.count)...(index + 1)))
            #expect(numbers.count == index + 1 - trimmed[index])
        }
    }

    @Test func turnsOfOneAgentAreSerialized() async throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"delay_ms":200},{"echo":true}]"#)])
        let agent = Self.agent(gateway, model: "m", tools: [])
        let first = agent.run("one")
        let second = agent.run("two")
        #expect(try await second.response().text == "two")
        #expect(try await first.response().text == "one")
        let requests = gateway.requests()
        #expect(requests.map(\.userTexts) == [["one"], ["one", "two"]])
    }

    /// Eight turns started back to back run in the order they were started (each sees the ones before it).
    /// The defect (a turn took its place when its task first ran, so two turns started together ran in whichever
    /// order the tasks were scheduled) made turnsOfOneAgentAreSerialized fail now and then under load; it depends
    /// on scheduling, so this test passed on the unfixed code in the runs tried.
    @Test func turnsRunInTheOrderTheyWereStarted() async throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"delay_ms":20},{"echo":true}]"#)])
        let agent = Self.agent(gateway, model: "m", tools: [])
        let prompts = (1...8).map { "turn \($0)" }
        let runs = prompts.map { agent.run($0) }
        for (run, prompt) in zip(runs, prompts) { #expect(try await run.response().text == prompt) }
        let requests = gateway.requests()
        #expect(requests.map { $0.userTexts.last ?? "" } == prompts)
        #expect(requests.map(\.userTexts.count) == Array(1...8))
    }

    @Test func eventsSerializeToOneJSONObjectEach() async throws {
        let gateway = try ScriptedGateway(models: [("m", Self.callsOnce)])
        let agent = Self.agent(gateway, model: "m", tools: [Self.lookup()])
        let events = await Self.events(of: agent.run("Hi"))
        let types = events.map { $0.json["type"]?.stringValue ?? "" }
        #expect(types == ["tool_call_started", "tool_call_completed", "text", "completed"])
        let completed = try #require(events.last?.json)
        #expect(completed["response"]?["tool_calls"]?[0]?["output"]?["text"] == "value of a")
        for event in events { #expect(try JSONParser.parse(event.json.jsonString) == event.json) }
    }
}
