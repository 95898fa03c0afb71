// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMClient
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// The agent loop with a real model: afmd serving the local backend (llama.cpp) with the default model
/// (SmolLM2-135M). `make test` builds and fetches both first; when they are missing the test fails with the reason.
@Suite(.serialized)
struct AgentLocalModelTests {
    struct Missing: Error, CustomStringConvertible { var description: String }

    /// Starts afmd with the staged `local.so` and the default model.
    static func localGateway() throws -> DaemonProcess {
        let staged = ProcessInfo.processInfo.environment["AFM_STAGE_DIR"].map { $0 + "/backends" } ?? TestPaths.root + "/.build/afm/backends"
        let model = ProcessInfo.processInfo.environment["AFM_MODEL"] ?? TestPaths.root + "/.cache/afm/models/smollm2-135m-instruct-q4_1.gguf"
        guard FileManager.default.fileExists(atPath: staged + "/local.so") else {
            throw Missing(description: "\(staged)/local.so is missing: run `make build` (scripts/build-local-backend)")
        }
        guard FileManager.default.fileExists(atPath: model) else { throw Missing(description: "\(model) is missing: run scripts/fetch-model") }
        let directory = BackendDirectoryBuilder()
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/local.so", withDestinationPath: staged + "/local.so")
        try FileManager.default.copyItem(atPath: staged + "/local.json", toPath: directory.path + "/local.json")
        return try DaemonProcess(backendDirectory: directory.path, config: "[Backend.local]\nModel=\(model)\nContextTokens=2048\n")
    }

    @Test func aTurnCallsALocalToolAndAnswersWithItsResult() async throws {
        let daemon = try Self.localGateway()
        defer { daemon.stop() }
        let received = AgentSteeringTests.Counter()
        let weather = AgentTool.local(
            name: "get_weather", description: "Gets the current weather in a city.",
            parameters: ["type": "object", "properties": ["city": ["type": "string"]], "required": ["city"]]
        ) { arguments in
            received.increment()
            return .text("It is 31 degrees and sunny in \(arguments["city"]?.stringValue ?? "the city").")
        }
        let agent = Agent(
            configuration: .init(
                url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "on-device",
                instructions: "Answer in one short sentence.", tools: [weather]))
        // Step 0 must call the tool (constrained by the gateway); step 1 answers from its output.
        let policy = TurnPolicy(toolMode: .named("get_weather"), maxOutputTokens: 48, temperature: 0, parallelToolCalls: false)
        let run = agent.run("What is the weather in Paris?", policy: policy)
        var texts: [String] = []
        for await event in run { if case .text(_, let text, _) = event { texts.append(text) } }
        let response = try await run.response()
        #expect(received.count == 1)
        #expect(response.toolCalls.count == 1)
        #expect(response.toolCalls.first?.call.name == "get_weather")
        let arguments = try JSONParser.parse(response.toolCalls.first?.call.arguments ?? "")
        #expect(arguments["city"]?.stringValue?.isEmpty == false, "\(arguments)")
        #expect(response.steps == 2)
        #expect(!response.text.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty)
        #expect(texts.last == response.text)
        #expect(response.usage.inputTokens > 0 && response.usage.outputTokens > 0)
        // The answer uses the tool's result.
        #expect(response.text.contains("31") || response.text.lowercased().contains("sunny"), "\(response.text)")
        // The history holds the whole turn: prompt, call, output, answer.
        #expect(agent.history.map { $0["type"]?.stringValue ?? "" } == ["message", "function_call", "function_call_output", "message"])
    }

    @Test func aSchemaTurnOnTheLocalModelAnswersInSchemaOrder() async throws {
        let daemon = try Self.localGateway()
        defer { daemon.stop() }
        let agent = Agent(
            configuration: .init(url: ServerURL(host: "127.0.0.1", port: daemon.port, pathPrefix: ""), model: "on-device"))
        let schema = AgentSchema(
            name: "decision",
            schema: [
                "type": "object",
                "properties": [
                    "reasoning": ["type": "string", "maxLength": 80],
                    "choice": ["type": "string", "enum": ["open", "wait"]],
                ],
                "required": ["reasoning", "choice"],
            ])
        let run = agent.run(
            "A guard sleeps at the gate. Should the thief open the gate or wait?",
            policy: TurnPolicy(schema: schema, maxOutputTokens: 96, temperature: 0))
        var partials = 0
        for await event in run { if case .partial = event { partials += 1 } }
        let response = try await run.response()
        let answer = try #require(response.json)
        #expect(answer.objectValue?.keys == ["reasoning", "choice"])
        #expect(["open", "wait"].contains(answer["choice"]?.stringValue ?? ""), "\(answer)")
        #expect(partials >= 2)
        #expect(response.steps == 1)
    }
}
