// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON
import Testing

@testable import AFMAgent

/// The pure pieces of the agent runtime, without I/O: partial JSON, schema order, the step controller's table,
/// the error table.
struct AgentPiecesTests {
    @Test(arguments: [
        (#"{"reasoning":"because it is"#, #"{"reasoning":"because it is"}"#),
        (#"{"reasoning":"ok","choice":"#, #"{"reasoning":"ok"}"#),
        (#"{"reasoning":"ok","cho"#, #"{"reasoning":"ok"}"#),
        (#"{"items":[1,2,{"a":tr"#, #"{"items":[1,2,{}]}"#),
        (#"{"a":"x\"#, #"{"a":"x"}"#),
        (#"{"#, "{}"),
        ("[", "[]"),
    ])
    func partialJSONClosesWhatIsOpen(text: String, expected: String) throws {
        #expect(PartialJSON.snapshot(text) == (try JSONParser.parse(expected)))
    }

    /// A turn's usage adds the server's counts of each response; a hostile server's huge counts saturate instead
    /// of trapping `afm agent` / `afm chat`.
    @Test func usageFromAHostileServerSaturates() throws {
        let huge = try #require(
            ResponseUsage(
                json: try JSONParser.parse(
                    #"{"input_tokens":9223372036854775807,"output_tokens":9223372036854775807,"#
                        + #""output_tokens_details":{"reasoning_tokens":-9223372036854775808},"#
                        + #""input_tokens_details":{"cached_tokens":9223372036854775807}}"#)))
        let sum = huge + huge + ResponseUsage(inputTokens: 1, outputTokens: 1, reasoningTokens: -1, cachedTokens: 1)
        #expect(sum == ResponseUsage(inputTokens: .max, outputTokens: .max, reasoningTokens: .min, cachedTokens: .max))
        #expect(ResponseUsage(inputTokens: 2, outputTokens: 3) + ResponseUsage(inputTokens: 5, outputTokens: 7)
            == ResponseUsage(inputTokens: 7, outputTokens: 10))
    }

    @Test func partialJSONOfNothingIsNil() {
        #expect(PartialJSON.snapshot("") == nil)
        #expect(PartialJSON.snapshot("   ") == nil)
    }

    @Test func schemaOrderFollowsPropertiesRefsAndAnyOf() throws {
        let schema = try JSONParser.parse(
            #"""
            {"type":"object","properties":{"reasoning":{"type":"string"},"choice":{"$ref":"#/$defs/Choice"},
             "steps":{"type":"array","items":{"anyOf":[{"type":"object","properties":{"x":{},"y":{}}},{"type":"object","properties":{"p":{},"q":{}}}]}}},
             "$defs":{"Choice":{"type":"object","properties":{"id":{},"label":{}}}}}
            """#)
        let answer = try JSONParser.parse(
            #"{"steps":[{"q":1,"p":2},{"y":3,"x":4}],"choice":{"label":"L","id":7},"extra":true,"reasoning":"r"}"#)
        let ordered = SchemaOrder.reorder(answer, schema: schema)
        #expect(ordered.jsonString == #"{"reasoning":"r","choice":{"id":7,"label":"L"},"steps":[{"p":2,"q":1},{"x":4,"y":3}],"extra":true}"#)
    }

    static func tool(_ name: String) -> AgentTool {
        .external(name: name, description: name, parameters: ["type": "object", "properties": [:]])
    }

    @Test func theStepControllerTable() {
        let tools = [Self.tool("a"), Self.tool("b")]
        var named = StepController(policy: TurnPolicy(toolMode: .named("b")), tools: tools)
        #expect(named.plan().mode == .required)
        #expect(named.plan().tools.map(\.name) == ["b"])
        named.finishStep(calls: 1)
        #expect(named.plan().mode == .allowed)
        #expect(named.plan().tools.map(\.name) == ["a", "b"])
        #expect(named.plan().toolChoice == "auto")

        var budget = StepController(policy: TurnPolicy(toolMode: .required, maxToolCalls: 2), tools: tools)
        #expect(budget.plan().toolChoice == "required")
        budget.finishStep(calls: 2)
        #expect(budget.plan().mode == .disallowed)
        #expect(budget.plan().tools.isEmpty && budget.plan().toolChoice == nil)
        #expect(budget.toolRounds == 1 && budget.callsMade == 2)

        #expect(StepController(policy: TurnPolicy(toolMode: .none), tools: tools).plan().mode == .disallowed)
        #expect(StepController(policy: TurnPolicy(), tools: []).plan().mode == .disallowed)
        #expect(StepController(policy: TurnPolicy(maxToolCalls: 0), tools: tools).plan().mode == .disallowed)
    }

    @Test func trimmingKeepsTheCurrentTurnEvenOverBudget() {
        let turn: [JSONValue] = [["type": "message", "role": "user", "content": [["type": "input_text", "text": .string(String(repeating: "x", count: 300))]]]]
        let fitted = ContextTrimmer.fit(history: [turn, turn], current: turn, fixedTokens: 0, budget: 10)
        #expect(fitted.droppedTurns == 2)
        #expect(fitted.input == turn)
        #expect(ContextTrimmer.fit(history: [turn], current: turn, fixedTokens: 0, budget: nil).droppedTurns == 0)
    }

    @Test func errorCodesMapFromTheGatewayAndToExitStatuses() {
        #expect(AgentErrorCode(gatewayCode: "context_length_exceeded") == .contextSizeExceeded)
        #expect(AgentErrorCode(gatewayCode: "model_not_found") == .modelUnavailable)
        #expect(AgentErrorCode(gatewayCode: "invalid_value") == .invalidRequest)
        #expect(AgentErrorCode(gatewayCode: "invalid_tool_schema") == .invalidSchema)
        #expect(AgentErrorCode(gatewayCode: "output_limit_exceeded") == .generationFailed)
        // The gateway's 400s for an image (AFMImages' codes) are bad input too, exit 65 (they were generation_failed,
        // exit 70, before).
        for code in ["invalid_image_url", "invalid_base64", "image_too_large", "unsupported_image_format", "invalid_image", "invalid_image_dimensions"] {
            #expect(AgentErrorCode(gatewayCode: code) == .invalidRequest, "\(code)")
        }
        // afmd's own 413 and 431 (a body or headers over its limits) are bad input too. Were generation_failed before.
        #expect(AgentErrorCode(gatewayCode: "request_too_large") == .invalidRequest)
        #expect(AgentErrorCode(gatewayCode: "headers_too_large") == .invalidRequest)
        #expect(AgentErrorCode.allCases.count == 12)
        #expect(Set(AgentErrorCode.allCases.map(\.jsonRPCCode)).count == 12)
        #expect(AgentErrorCode.allCases.allSatisfy { (-32099 ... -32000).contains($0.jsonRPCCode) })
        #expect(AgentErrorCode.cancelled.exitStatus == 130)
        #expect(AgentErrorCode.rateLimited.exitStatus == 69)
        #expect(AgentErrorCode.invalidSchema.exitStatus == 65)
        #expect(AgentErrorCode.generationFailed.exitStatus == 70)
    }
}
