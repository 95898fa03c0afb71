// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The token counts of one response (`usage` of the Responses API).
public struct ResponseUsage: Sendable, Hashable {
    public var inputTokens: Int
    public var outputTokens: Int
    /// Of `outputTokens`, those spent reasoning.
    public var reasoningTokens: Int
    /// Of `inputTokens`, those served from a prompt cache.
    public var cachedTokens: Int

    public init(inputTokens: Int = 0, outputTokens: Int = 0, reasoningTokens: Int = 0, cachedTokens: Int = 0) {
        self.inputTokens = inputTokens
        self.outputTokens = outputTokens
        self.reasoningTokens = reasoningTokens
        self.cachedTokens = cachedTokens
    }

    /// Reads a `usage` object; nil when it is not one (`null` before the response ends).
    public init?(json: JSONValue) {
        guard json.objectValue != nil else { return nil }
        inputTokens = json["input_tokens"]?.numberValue?.intValue ?? 0
        outputTokens = json["output_tokens"]?.numberValue?.intValue ?? 0
        reasoningTokens = json["output_tokens_details"]?["reasoning_tokens"]?.numberValue?.intValue ?? 0
        cachedTokens = json["input_tokens_details"]?["cached_tokens"]?.numberValue?.intValue ?? 0
    }

    /// Adds another response's counts (an agent's turn spans several responses), saturating: the counts are the
    /// server's, and a hostile one must not trap the client with numbers near `Int.max`.
    public static func + (lhs: ResponseUsage, rhs: ResponseUsage) -> ResponseUsage {
        func add(_ a: Int, _ b: Int) -> Int {
            let (sum, overflow) = a.addingReportingOverflow(b)
            return overflow ? (b > 0 ? .max : .min) : sum
        }
        return ResponseUsage(
            inputTokens: add(lhs.inputTokens, rhs.inputTokens), outputTokens: add(lhs.outputTokens, rhs.outputTokens),
            reasoningTokens: add(lhs.reasoningTokens, rhs.reasoningTokens),
            cachedTokens: add(lhs.cachedTokens, rhs.cachedTokens))
    }
}
