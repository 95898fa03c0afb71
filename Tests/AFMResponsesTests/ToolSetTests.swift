// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON
import Testing

@testable import AFMResponses

/// The tool set's checks of what a backend did with the tools: a call's arguments against the tool's parameters,
/// and a backend's refusal of a tool schema located in the client's request.
@Suite struct ToolSetTests {
    static let parameters: JSONValue = [
        "type": "object", "properties": ["score": ["type": "number", "minimum": 0, "maximum": 10]], "required": ["score"],
    ]

    func toolSet() throws -> ToolSet {
        try ToolSet(
            tools: [["type": "web_search"], ["type": "function", "name": "rate", "parameters": Self.parameters], ["type": "custom", "name": "patch"]],
            choice: nil)
    }

    @Test func callArgumentsAreCheckedLikeAStructuredAnswer() throws {
        let tools = try toolSet()
        #expect(tools.checkArguments(ofCall: "rate", #"{"score":9.5}"#) == nil)
        let high = try #require(tools.checkArguments(ofCall: "rate", #"{"score":10.000000000000000001}"#))
        #expect(high.code == .invalidStructuredOutput)
        #expect(high.param == "tools[1].parameters")
        #expect(high.message.contains("'rate'") && high.message.contains("$.score"), "\(high.message)")
        #expect(tools.checkArguments(ofCall: "rate", #"{"score":"#)?.message.contains("not JSON") == true)
        // Empty arguments are no arguments: the required member is missing.
        #expect(tools.checkArguments(ofCall: "rate", "")?.message.contains("score") == true)
        // A tool the request does not offer has no schema to check, but its arguments must be a JSON object.
        #expect(tools.checkArguments(ofCall: "other", #"{"anything":[1]}"#) == nil)
        #expect(tools.checkArguments(ofCall: "other", " ") == nil)
        for arguments in ["not json", "[1,2]", "42", #""text""#] {
            let error = tools.checkArguments(ofCall: "other", arguments)
            #expect(error?.code == .invalidStructuredOutput, "\(arguments)")
            #expect(error?.message.contains("'other'") == true, "\(arguments)")
        }
    }

    @Test func aBackendsRefusalOfAToolSchemaNamesTheClientsPath() throws {
        let tools = try toolSet()
        let refusal = AFMError(.invalidRequest, "tools[0].parameters.properties.score.maxLength is 9000: above the grammar's limit of 2000")
        let located = tools.locating(refusal)
        #expect(located.param == "tools[1].parameters.properties.score.maxLength")
        #expect(located.message == "tools[1].parameters.properties.score.maxLength is 9000: above the grammar's limit of 2000")
        let budget = tools.locating(AFMError(.invalidRequest, "tools[0].parameters.properties.p9.maxLength: the length and count bounds exceed 50000"))
        #expect(budget.param == "tools[1].parameters.properties.p9.maxLength")
        // Not a tool path, an index out of range, a param already set, another code: unchanged.
        for error in [
            AFMError(.invalidRequest, "output_format.schema.properties.x.maximum is 0.5"),
            AFMError(.invalidRequest, "tools[7].parameters.properties.x.minLength is 5000"),
            AFMError(.invalidRequest, "tools[0].parameters.x", param: "model"),
            AFMError(.internal, "tools[0].parameters.properties.x"),
            AFMError(.invalidRequest, "tools[0].parametersX"),
        ] {
            #expect(tools.locating(error).param == error.param, "\(error.message)")
            #expect(tools.locating(error).message == error.message)
        }
        // Chat Completions' and Messages' fields.
        var chat = ToolSet()
        try chat.addFunction(["name": "save", "parameters": Self.parameters], path: "tools[0].function")
        #expect(chat.locating(refusal).param == "tools[0].function.parameters.properties.score.maxLength")
        var messages = ToolSet()
        try messages.addFunction(["name": "save", "input_schema": Self.parameters], path: "tools[0]", parametersKey: "input_schema")
        #expect(messages.locating(refusal).param == "tools[0].input_schema.properties.score.maxLength")
    }
}
