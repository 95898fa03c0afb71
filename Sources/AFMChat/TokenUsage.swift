// SPDX-License-Identifier: Apache-2.0

/// The tokens one answer took, as the gateway reported them (`usage` of the finished response).
public struct TokenUsage: Sendable, Hashable {
    public var inputTokens: Int
    public var outputTokens: Int

    public init(inputTokens: Int, outputTokens: Int) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
    }
}
