// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import Testing

/// Schema turns through `text.format` json_schema, against the real scripted backend.
@Suite(.serialized)
struct AgentSchemaTurnTests {
    static let decision = AgentSchema(
        name: "decision",
        schema: [
            "type": "object",
            "properties": ["reasoning": ["type": "string"], "choice": ["type": "string", "enum": ["open", "wait"]]],
            "required": ["reasoning", "choice"],
        ])

    @Test func aSchemaTurnStreamsPartialsAndAnswersInSchemaOrder() async throws {
        // The model writes `choice` first: the answer comes back with `reasoning` first, as the schema orders it.
        let steps = #"[{"json":{"text":"{\"choice\":\"open\",\"reasoning\":\"the guard is asleep\"}","chunks":6}}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let agent = Agent(configuration: .init(url: gateway.url, model: "m"))
        let run = agent.run("Open the gate?", policy: TurnPolicy(schema: Self.decision))
        var partials: [JSONValue] = []
        var texts = 0
        for await event in run {
            switch event {
            case .partial(let value): partials.append(value)
            case .text: texts += 1
            default: break
            }
        }
        let response = try await run.response()
        #expect(response.json?.jsonString == #"{"reasoning":"the guard is asleep","choice":"open"}"#)
        #expect(response.text == #"{"choice":"open","reasoning":"the guard is asleep"}"#)
        #expect(texts == 0)
        #expect(partials.count >= 3)
        #expect(partials.last == (try JSONParser.parse(response.text)))
        #expect(partials.allSatisfy { $0.objectValue != nil })
        let format = try #require(gateway.requests().first?["output_format"])
        #expect(format["type"] == "json_schema")
        #expect(format["name"] == "decision")
        #expect(format["schema"]?["properties"]?.objectValue?.keys == ["reasoning", "choice"])
    }

    @Test func anAnswerThatDoesNotMatchIsAnInvalidSchemaError() async throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"json":{"text":"{\"choice\":"}}]"#)])
        let agent = Agent(configuration: .init(url: gateway.url, model: "m"))
        do {
            _ = try await agent.run("Open the gate?", policy: TurnPolicy(schema: Self.decision)).response()
            Issue.record("a broken structured answer completed")
        } catch {
            #expect(error.code == .invalidSchema, "\(error)")
            #expect(error.gatewayCode == "invalid_structured_output")
            #expect(error.code.exitStatus == 65)
        }
        #expect(agent.turnCount == 0)
    }

    @Test func aSchemaTheGatewayCannotEnforceIsAnInvalidSchemaError() async throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"json":{"text":"{}"}}]"#)])
        let agent = Agent(configuration: .init(url: gateway.url, model: "m"))
        let open = AgentSchema(name: "open", schema: ["type": "object", "patternProperties": ["^x": ["type": "string"]]])
        do {
            _ = try await agent.run("Hi", policy: TurnPolicy(schema: open)).response()
            Issue.record("an unenforceable schema was accepted")
        } catch {
            #expect(error.code == .invalidSchema, "\(error)")
            #expect(error.gatewayCode == "invalid_json_schema")
        }
    }
}
