// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import Foundation
import Synchronization
import Testing

/// The tool runtime at its edges, against the real scripted backend (which records every request) and the real
/// MCP test server: images in tool outputs, per-call timeouts, and a turn cancelled while the host owes an answer.
@Suite(.serialized)
struct AgentToolEdgeTests {
    static let noArguments: JSONValue = ["type": "object", "properties": [:]]

    /// Calls `picture` (count times in one step) until an output comes back, then answers.
    static func callsPicture(times count: Int = 1) -> String {
        let calls = Array(repeating: #"{"tool_call":{"name":"picture","arguments":"{}"}}"#, count: count).joined(separator: ",")
        // Only while the request offers tools: a model calls no tool it was not offered (afmd fails a response that
        // does), and a later turn whose history was trimmed of the earlier call runs with no tools.
        return #"[{"if_input_has":"function_call_output","then":[{"text":"I see it"}],"else":[{"if_tools_offered":true,"then":[\#(calls)],"else":[{"text":"I see it"}]}]}]"#
    }

    /// The image parts of a recorded generation request, in input order.
    static func images(_ request: JSONValue) -> [JSONValue] {
        (request["input"]?.arrayValue ?? []).flatMap { item in (item["content"]?.arrayValue ?? []).filter { $0["type"] == "image" } }
    }

    /// A model that accepts images gets an MCP tool's image as an image: the tool output's text says where it is,
    /// and a user message right after the step's outputs carries it (afmd takes images only in user messages).
    /// Failed before: the model got only the placeholder text "[image image/png, 75 bytes]".
    @Test func aModelThatSeesGetsAToolsImageAsAnImage() async throws {
        let gateway = try ScriptedGateway(models: [("eyes", Self.callsPicture())], capabilities: ["eyes": #"{"vision":true}"#])
        let server = try await MCPServer.start(try MCPCallTests.extras())
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", toolProviders: [server]))
        let response = try await agent.run("What does the picture show?").response()
        #expect(response.text == "I see it")
        let record = try #require(response.toolCalls.first)
        #expect(record.output.content.count == 2)
        let requests = gateway.requests()
        try #require(requests.count == 2)
        #expect(requests[1].inputTypes == ["message", "function_call", "function_call_output", "message"])
        let input = requests[1]["input"]?.arrayValue ?? []
        try #require(input.count == 4)
        let output = input[2]["output"]?.stringValue ?? ""
        #expect(output.hasPrefix("a red square\n"), "\(output)")
        #expect(output.contains("[image 1 (image/png) is in the next message]"), "\(output)")
        #expect(input[3]["role"] == "user")
        let images = Self.images(requests[1])
        #expect(images.count == 1)
        #expect(images.first?["mime_type"] == "image/png")
        #expect(images.first?["width"] == 4 && images.first?["height"] == 4)
        // The label before the image names the call it came from.
        let label = input[3]["content"]?[0]?["text"]?.stringValue ?? ""
        #expect(label.contains("image 1") && label.contains("picture") && label.contains(record.call.callID), "\(label)")
        // The history keeps the image for later turns.
        #expect(agent.history.count == 5)
        await server.shutdown()
    }

    /// A model that does not accept images reads a placeholder naming the image and why it is not shown; the
    /// request carries no image (the gateway would refuse it with 400 `unsupported_capability`).
    @Test func aModelThatDoesNotSeeReadsAPlaceholder() async throws {
        let gateway = try ScriptedGateway(models: [("blind", Self.callsPicture())])
        let server = try await MCPServer.start(try MCPCallTests.extras())
        let agent = Agent(configuration: .init(url: gateway.url, model: "blind", toolProviders: [server]))
        let response = try await agent.run("What does the picture show?").response()
        #expect(response.text == "I see it")
        let requests = gateway.requests()
        try #require(requests.count == 2)
        #expect(requests[1].inputTypes == ["message", "function_call", "function_call_output"])
        #expect(Self.images(requests[1]).isEmpty)
        let output = requests[1]["input"]?[2]?["output"]?.stringValue ?? ""
        #expect(output.hasPrefix("a red square\n[image image/png, "), "\(output)")
        #expect(output.contains("not shown: the model blind does not accept images"), "\(output)")
        await server.shutdown()
    }

    /// afmd takes at most 4 images per request, across the whole history: the newest 4 go as images, older ones
    /// as text saying so. Five pictures in one step would otherwise make the next step a 400 (`too_many_images`).
    @Test func atMostFourImagesGoToTheModelTheNewest() async throws {
        let gateway = try ScriptedGateway(models: [("eyes", Self.callsPicture(times: 5))], capabilities: ["eyes": #"{"vision":true}"#])
        let server = try await MCPServer.start(try MCPCallTests.extras())
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", toolProviders: [server]))
        let response = try await agent.run("Five pictures").response()
        #expect(response.text == "I see it")
        #expect(response.toolCalls.count == 5)
        let requests = gateway.requests()
        try #require(requests.count == 2)
        #expect(Self.images(requests[1]).count == 4)
        let message = requests[1]["input"]?.arrayValue?.last
        let texts = (message?["content"]?.arrayValue ?? []).compactMap { $0["text"]?.stringValue }
        // The oldest image's label stays, the image itself is a text saying it is not shown.
        #expect(texts.count == 6, "\(texts)")
        #expect(texts.first?.contains("tool output image 1, returned by picture") == true, "\(texts)")
        #expect(texts.dropFirst().first?.contains("image not shown: a request carries at most 4 images") == true, "\(texts)")
        // The next turn replays the history: still four images at most.
        _ = try await agent.run("again", policy: TurnPolicy(toolMode: .none)).response()
        #expect(Self.images(gateway.requests().last ?? .null).count == 4)
        await server.shutdown()
    }

    /// Each tool's own timeout wins over the policy's: a local tool, an external tool and an MCP tool (the
    /// server's `toolTimeout`) that take too long become error outputs at their timeouts, and the turn goes on to
    /// its answer — long before the policy's 60 s and 120 s.
    @Test func aSlowToolBecomesAnErrorOutputAtItsOwnTimeout() async throws {
        let threeCalls = #"""
            [{"if_input_has":"function_call_output","then":[{"text":"carried on"}],
              "else":[{"tool_call":{"name":"ponder","arguments":"{}"}},{"tool_call":{"name":"ask_host","arguments":"{}"}},
                      {"tool_call":{"name":"sleep","arguments":"{\"seconds\":30}"}}]}]
            """#
        let gateway = try ScriptedGateway(models: [("m", threeCalls)])
        let server = try await MCPServer.start(try MCPCallTests.extras(toolTimeout: .seconds(1)))
        let ponder = AgentTool.local(name: "ponder", description: "Thinks.", parameters: Self.noArguments, timeout: .milliseconds(500)) { _ in
            try await Task.sleep(for: .seconds(60))
            return .text("late")
        }
        let askHost = AgentTool.external(name: "ask_host", description: "Asks.", parameters: Self.noArguments, timeout: .milliseconds(500))
        let agent = Agent(configuration: .init(url: gateway.url, model: "m", tools: [ponder, askHost], toolProviders: [server]))
        let clock = ContinuousClock()
        let start = clock.now
        let response = try await agent.run("Go").response()
        #expect(clock.now - start < .seconds(20))
        #expect(response.text == "carried on")
        let outputs = response.toolCalls.map(\.output)
        #expect(outputs.map(\.isError) == [true, true, true])
        #expect(outputs[0].text.contains("tool ponder timed out after 0.5 s"), "\(outputs[0].text)")
        #expect(outputs[1].text.contains("did not answer tool ask_host within 0.5 s"), "\(outputs[1].text)")
        #expect(outputs[2].text.contains("did not answer tools/call within 1 s"), "\(outputs[2].text)")
        // The model read the three error outputs.
        try #require(gateway.requests().count == 2)
        let sent = (gateway.requests()[1]["input"]?.arrayValue ?? []).filter { $0["type"] == "function_call_output" }
        #expect(sent.map { $0["output"]?.stringValue ?? "" } == outputs.map(\.text))
        // The MCP server was told to stop the abandoned call.
        var report = try await MCPCallTests.received(server)
        for _ in 0..<100 where report.cancelledSleeps.isEmpty {
            try await Task.sleep(for: .milliseconds(50))
            report = try await MCPCallTests.received(server)
        }
        #expect(report.cancelledSleeps == [30])
        await server.shutdown()
    }

    /// Cancelling a turn while an external call waits for the host: the call gets an error output at once, the
    /// turn fails `cancelled` (no further step is asked), the history is what it was, and a late answer from the
    /// host is refused.
    @Test func cancellingWhileAnExternalCallWaitsEndsTheTurnAndRollsBack() async throws {
        let steps = #"""
            [{"if_input_has":"message","at_least":3,
              "then":[{"if_input_has":"function_call_output","then":[{"text":"opened"}],
                       "else":[{"tool_call":{"name":"open_door","arguments":"{}"}}]}],
              "else":[{"text":"hello"}]}]
            """#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let door = AgentTool.external(name: "open_door", description: "Opens the door.", parameters: Self.noArguments)
        let agent = Agent(configuration: .init(url: gateway.url, model: "m", tools: [door]))
        #expect(try await agent.run("hi").response().text == "hello")
        let before = agent.history
        let run = agent.run("open the door")
        var events: [AgentEvent] = []
        var callID: String?
        let clock = ContinuousClock()
        let start = clock.now
        for await event in run {
            events.append(event)
            if case .toolCallRequested(let call) = event {
                callID = call.callID
                try await Task.sleep(for: .milliseconds(200))
                run.cancel()
            }
        }
        // Far below the external timeout (120 s): the cancel answered the waiting call.
        #expect(clock.now - start < .seconds(30))
        guard case .failed(let error)? = events.last else {
            Issue.record("the turn did not fail: \(events)")
            return
        }
        #expect(error.code == .cancelled)
        let completed = events.compactMap { event -> ToolCallRecord? in
            if case .toolCallCompleted(let record) = event { return record }
            return nil
        }
        #expect(completed.count == 1)
        #expect(completed.first?.output.isError == true)
        #expect(completed.first?.output.text.contains("cancelled") == true)
        #expect(agent.history == before)
        #expect(agent.turnCount == 1)
        #expect(!run.submit(.text("opened late"), for: try #require(callID)))
        // One request for the first turn, one for the cancelled turn's first step; none after the cancel.
        #expect(gateway.requests().count == 2)
        do {
            _ = try await run.response()
            Issue.record("a cancelled turn answered")
        } catch {
            #expect(error.code == .cancelled)
        }
    }

    /// An external call the host never answers, in a turn the host never cancels, ends at its timeout as an error
    /// output; a late answer is refused and the turn completes with the model's answer.
    @Test func aLateAnswerToATimedOutExternalCallIsRefused() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"moved on"}],"else":[{"tool_call":{"name":"open_door","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let door = AgentTool.external(name: "open_door", description: "Opens the door.", parameters: Self.noArguments)
        let agent = Agent(
            configuration: .init(url: gateway.url, model: "m", tools: [door], policy: TurnPolicy(externalToolTimeout: .milliseconds(300))))
        let run = agent.run("open the door")
        var callID: String?
        var late: Bool?
        for await event in run {
            if case .toolCallRequested(let call) = event { callID = call.callID }
            if case .toolCallCompleted = event, let callID { late = run.submit(.text("opened late"), for: callID) }
        }
        #expect(late == false)
        let response = try await run.response()
        #expect(response.text == "moved on")
        #expect(response.toolCalls.first?.output.isError == true)
        #expect(agent.turnCount == 1)
    }

    /// A step's first text delta after an earlier step's text says so (`isReset`): the host replaces what it
    /// showed ("let me look" gives way to the answer); the deltas of one step accumulate in `text`.
    @Test func theFirstTextOfALaterStepIsAReset() async throws {
        let steps = #"""
            [{"if_input_has":"function_call_output","then":[{"text":"It is "},{"text":"noon."}],
              "else":[{"text":"Let me look."},{"tool_call":{"name":"clock","arguments":"{}"}}]}]
            """#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let clock = AgentTool.local(name: "clock", description: "Tells the time.", parameters: Self.noArguments) { _ in .text("12:00") }
        let agent = Agent(configuration: .init(url: gateway.url, model: "m", tools: [clock]))
        let run = agent.run("What time is it?")
        var texts: [(delta: String, text: String, isReset: Bool)] = []
        for await event in run {
            if case .text(let delta, let text, let isReset) = event { texts.append((delta, text, isReset)) }
        }
        #expect(try await run.response().text == "It is noon.")
        #expect(texts.map(\.isReset) == [false, true, false], "\(texts)")
        #expect(texts.first?.text == "Let me look.")
        #expect(texts.last?.text == "It is noon.")
        #expect(texts.map(\.delta).joined() == "Let me look.It is noon.")
    }

    /// A handler that ignores cancellation outlives its timeout: the model gets the timeout's error output at
    /// once, but the turn reports its end only after the handler returned (agents.md §1.7: nothing of the turn
    /// still runs when it ends).
    @Test func aTurnEndsOnlyAfterAHandlerThatIgnoredItsTimeoutReturned() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"done"}],"else":[{"tool_call":{"name":"stubborn","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        final class Flag: Sendable {
            let value = Mutex(false)
        }
        let returned = Flag()
        let stubborn = AgentTool.local(name: "stubborn", description: "Ignores cancellation.", parameters: Self.noArguments, timeout: .milliseconds(200)) { _ in
            // Sleeps 1.5 s whatever happens: a cancelled Task.sleep throws, so the time is waited out in steps.
            let end = ContinuousClock.now + .milliseconds(1500)
            while ContinuousClock.now < end { try? await Task.sleep(for: .milliseconds(50)) }
            returned.value.withLock { $0 = true }
            return .text("too late")
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "m", tools: [stubborn]))
        let run = agent.run("Go")
        var completedBeforeReturn: Bool?
        var outputBeforeReturn: Bool?
        for await event in run {
            if case .toolCallCompleted = event { outputBeforeReturn = !returned.value.withLock { $0 } }
            if case .completed = event { completedBeforeReturn = !returned.value.withLock { $0 } }
        }
        #expect(outputBeforeReturn == true, "the timeout's output waited for the handler")
        #expect(completedBeforeReturn == false, "the turn ended while its handler still ran")
        let response = try await run.response()
        #expect(response.toolCalls.first?.output.text.contains("timed out after 0.2 s") == true)
        #expect(response.text == "done")
    }

    /// An agent whose model is an alias (`auto`) learns its target's input budget and `vision` capability from
    /// `/v1/models`: the oldest turns are trimmed to the target's budget and a tool's image goes as an image.
    @Test func anAliasModelUsesItsTargetsBudgetAndCapabilities() async throws {
        let gateway = try ScriptedGateway(
            models: [("eyes", Self.callsPicture())], contextTokens: 800, maxInputTokens: 400, capabilities: ["eyes": #"{"vision":true}"#])
        let server = try await MCPServer.start(try MCPCallTests.extras())
        let agent = Agent(configuration: .init(url: gateway.url, model: "auto", toolProviders: [server]))
        let first = try await agent.run("Show me").response()
        #expect(first.text == "I see it")
        try #require(gateway.requests().count == 2)
        #expect(Self.images(gateway.requests()[1]).count == 1, "the alias's target accepts images")
        var trimmed = 0
        for index in 1...6 {
            let prompt = "turn \(index): " + String(repeating: "x", count: 190)
            trimmed = try await agent.run(prompt, policy: TurnPolicy(toolMode: .none)).response().trimmedTurns
        }
        #expect(trimmed > 0, "the alias's target's 400-token budget trimmed nothing")
        #expect(gateway.requests().allSatisfy { $0["model"] == "eyes" })
        await server.shutdown()
    }

    /// Trimming counts an image as the gateway's estimate does (765 tokens): a turn that holds an image is left out
    /// when the next request would not fit. Failed before: the estimate counted images as nothing, so the turn
    /// was kept (trimmedTurns 0) and the request went over the model's 1000-token input budget by that estimate.
    @Test func trimmingCountsImagesAsTheGatewayDoes() async throws {
        let steps = #"""
            [{"if_input_has":"function_call_output","then":[{"text":"red"}],
              "else":[{"if_tools_offered":true,"then":[{"tool_call":{"name":"snapshot","arguments":"{}"}}],"else":[{"text":"noted"}]}]}]
            """#
        let gateway = try ScriptedGateway(
            models: [("eyes", steps)], contextTokens: 2000, maxInputTokens: 1000, capabilities: ["eyes": #"{"vision":true}"#])
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="
        let snapshot = AgentTool.local(name: "snapshot", description: "Takes a picture.", parameters: Self.noArguments) { _ in
            AgentToolOutput(content: [.image(mimeType: "image/png", base64: png)])
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", tools: [snapshot]))
        #expect(try await agent.run("Look").response().text == "red")
        #expect(Self.images(gateway.requests().last ?? .null).count == 1)
        // About 200 tokens of text: with the first turn's image (765) and its items it is over 1000.
        let prompt = "Remember this: " + String(repeating: "y", count: 600)
        let second = try await agent.run(prompt, policy: TurnPolicy(toolMode: .none)).response()
        #expect(second.text == "noted")
        #expect(second.trimmedTurns == 1)
        #expect(Self.images(gateway.requests().last ?? .null).isEmpty)
    }

    /// A 4×4 PNG (75 bytes), base64.
    static let png = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="

    /// The 4×4 PNG followed by `padding` zero bytes (a valid PNG of that size to the gateway's check), base64.
    static func paddedPNG(_ padding: Int) throws -> String {
        var bytes = try #require(Data(base64Encoded: png))
        bytes.append(Data(count: padding))
        return bytes.base64EncodedString()
    }

    /// The base64 bytes of a recorded request's images.
    static func imageBytes(_ request: JSONValue) -> Int {
        images(request).reduce(0) { $0 + ($1["data_base64"]?.stringValue?.utf8.count ?? 0) }
    }

    /// Images are limited by their bytes as well as their count: three images that each pass the gateway's check
    /// (5 MiB each) would make a 20 MiB body, over afmd's 16 MiB limit. Failed before: afmd refused the step with
    /// 413 and the turn failed (`generation_failed`).
    @Test func toolImagesTogetherStayUnderTheGatewaysBodyLimit() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"seen"}],"else":[{"tool_call":{"name":"shots","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("eyes", steps)], capabilities: ["eyes": #"{"vision":true}"#])
        let big = try Self.paddedPNG(5 * 1024 * 1024)
        let shots = AgentTool.local(name: "shots", description: "Takes pictures.", parameters: Self.noArguments) { _ in
            AgentToolOutput(content: Array(repeating: .image(mimeType: "image/png", base64: big), count: 3))
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", tools: [shots]))
        let response = try await agent.run("Three shots").response()
        #expect(response.text == "seen")
        let requests = gateway.requests()
        try #require(requests.count == 2)
        #expect(requests[1].jsonString.utf8.count < 16 * 1024 * 1024)
        #expect(Self.images(requests[1]).count == 1)
        #expect(Self.imageBytes(requests[1]) <= 12 * 1024 * 1024)
        // The newest image is the one sent; the older two are text saying why not.
        let texts = requests[1].userTexts.last ?? ""
        #expect(texts.contains("image not shown: a request carries at most 4 images and"), "\(texts)")
    }

    /// Trimming prices an image that will be replaced by its placeholder as the placeholder: six small images in
    /// the current turn (four are sent) leave room for the earlier turn. Failed before: all six were priced at 765
    /// tokens, so the first turn was left out for nothing (trimmedTurns 1).
    @Test func imagesThatWillNotBeSentDoNotCostHistory() async throws {
        let steps = #"""
            [{"if_input_has":"function_call_output","then":[{"text":"six"}],
              "else":[{"if_tools_offered":true,"then":[{"tool_call":{"name":"shots","arguments":"{}"}}],"else":[{"text":"hi"}]}]}]
            """#
        let gateway = try ScriptedGateway(
            models: [("eyes", steps)], contextTokens: 8000, maxInputTokens: 4000, capabilities: ["eyes": #"{"vision":true}"#])
        let shots = AgentTool.local(name: "shots", description: "Takes pictures.", parameters: Self.noArguments) { _ in
            AgentToolOutput(content: Array(repeating: .image(mimeType: "image/png", base64: Self.png), count: 6))
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", tools: [shots]))
        #expect(try await agent.run("hello", policy: TurnPolicy(toolMode: .none)).response().text == "hi")
        let second = try await agent.run("Six shots").response()
        #expect(second.text == "six")
        #expect(second.trimmedTurns == 0)
        let last = gateway.requests().last ?? .null
        #expect(last.userTexts.first == "hello", "\(last.userTexts)")
        #expect(Self.images(last).count == 4)
    }

    /// The history keeps at most the images a request may carry: older ones become the placeholder the model
    /// would read anyway. Failed before: every turn's image stayed in the history as base64, forever.
    @Test func theHistoryKeepsOnlyTheImagesARequestCarries() async throws {
        // One call per turn (the budget), so the second step offers no tool and the model answers.
        let steps = #"[{"if_tools_offered":true,"then":[{"tool_call":{"name":"shot","arguments":"{}"}}],"else":[{"text":"seen"}]}]"#
        let gateway = try ScriptedGateway(models: [("eyes", steps)], capabilities: ["eyes": #"{"vision":true}"#])
        let image = try Self.paddedPNG(1024 * 1024)
        let shot = AgentTool.local(name: "shot", description: "Takes a picture.", parameters: Self.noArguments) { _ in
            AgentToolOutput(content: [.image(mimeType: "image/png", base64: image)])
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", tools: [shot]))
        for turn in 1...6 {
            let text = try await agent.run("Picture \(turn)", policy: TurnPolicy(maxToolCalls: 1)).response().text
            #expect(text == "seen")
        }
        let parts = agent.history.flatMap { $0["content"]?.arrayValue ?? [] }
        #expect(parts.filter { $0["type"] == "input_image" }.count == 4)
        #expect(parts.contains { $0["text"]?.stringValue?.contains("image not shown") == true })
        #expect(Self.images(gateway.requests().last ?? .null).count == 4)
    }

    /// Two MCP servers offering a tool of the same name make the turn fail with `invalid_request` naming both
    /// servers, before any request. Failed before: both tools were offered and every step was a 400 from the
    /// gateway (duplicate tool names).
    @Test func twoServersWithTheSameToolNameAreRefusedNamingBoth() async throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"text":"never"}]"#)])
        let first = try await MCPServer.start(try MCPCallTests.extras())
        var twin = try MCPCallTests.extras()
        twin.name = "twin"
        let second = try await MCPServer.start(twin)
        let agent = Agent(configuration: .init(url: gateway.url, model: "m", toolProviders: [first, second]))
        do {
            _ = try await agent.run("Hi").response()
            Issue.record("the turn answered")
        } catch {
            #expect(error.code == .invalidRequest)
            #expect(error.message.contains("MCP server extras") && error.message.contains("MCP server twin"), "\(error.message)")
        }
        #expect(gateway.requests().isEmpty)
        await first.shutdown()
        await second.shutdown()
    }

    /// A tool's MIME type reaches the model as at most 64 printable characters. Failed before: a 10,000-character
    /// type was copied whole into the output text.
    @Test func aLongMimeTypeIsCutInThePlaceholder() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"seen"}],"else":[{"tool_call":{"name":"odd","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("eyes", steps)], capabilities: ["eyes": #"{"vision":true}"#])
        let type = "image/" + String(repeating: "x\n", count: 5000)
        let odd = AgentTool.local(name: "odd", description: "Odd.", parameters: Self.noArguments) { _ in
            AgentToolOutput(content: [.image(mimeType: type, base64: Self.png)])
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", tools: [odd]))
        #expect(try await agent.run("Odd").response().text == "seen")
        let output = gateway.requests().last?["input"]?[2]?["output"]?.stringValue ?? ""
        #expect(output.hasPrefix("[image image/xxxx"), "\(output.prefix(200))")
        #expect(output.utf8.count < 400, "\(output.prefix(200))")
        #expect(!output.contains("\n"))
    }

    /// An image the gateway would refuse (a format it does not take, or data that is not base64) is not sent: the
    /// model reads a placeholder saying why, the valid image beside it still goes, and the turn answers. Failed
    /// before: the request carried the SVG, the gateway refused it with 400 and the turn failed (`generation_failed`:
    /// "the image is not PNG, JPEG, WebP or GIF").
    @Test func anImageTheGatewayWouldRefuseIsAPlaceholder() async throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"seen"}],"else":[{"tool_call":{"name":"render","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("eyes", steps)], capabilities: ["eyes": #"{"vision":true}"#])
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP4z8AARwzEcQCukw/x0F8jngAAAABJRU5ErkJggg=="
        let svg = Data(#"<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"/>"#.utf8).base64EncodedString()
        let render = AgentTool.local(name: "render", description: "Renders.", parameters: Self.noArguments) { _ in
            AgentToolOutput(content: [
                .image(mimeType: "image/svg+xml", base64: svg), .image(mimeType: "image/png", base64: "not base64 at all!"),
                .image(mimeType: "image/png", base64: png),
            ])
        }
        let agent = Agent(configuration: .init(url: gateway.url, model: "eyes", tools: [render]))
        let response = try await agent.run("Render").response()
        #expect(response.text == "seen")
        let requests = gateway.requests()
        try #require(requests.count == 2)
        #expect(Self.images(requests[1]).count == 1)
        let output = requests[1]["input"]?[2]?["output"]?.stringValue ?? ""
        let lines = output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(output)")
        #expect(lines.first?.hasPrefix("[image image/svg+xml, ") == true && lines.first?.contains("not shown: ") == true, "\(output)")
        #expect(lines.dropFirst().first?.contains("not shown: ") == true, "\(output)")
        #expect(lines.last == "[image 1 (image/png) is in the next message]", "\(output)")
    }
}
