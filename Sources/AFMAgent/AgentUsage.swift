// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Tokens a turn spent, summed over its model steps.
public struct AgentUsage: Sendable, Hashable {
    public var inputTokens: Int
    public var outputTokens: Int
    public var reasoningTokens: Int
    public var cachedTokens: Int

    public init(inputTokens: Int = 0, outputTokens: Int = 0, reasoningTokens: Int = 0, cachedTokens: Int = 0) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.reasoningTokens = reasoningTokens
        self.cachedTokens = cachedTokens
    }

    public var json: JSONValue {
        [
            "input_tokens": .number(JSONNumber(inputTokens)), "output_tokens": .number(JSONNumber(outputTokens)),
            "reasoning_tokens": .number(JSONNumber(reasoningTokens)), "cached_tokens": .number(JSONNumber(cachedTokens)),
        ]
    }
}
