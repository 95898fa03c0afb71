// SPDX-License-Identifier: Apache-2.0
import AFMImages
import AFMJSON

/// The input-token estimate used when a backend offers no tokenizer (`afm.tokenize/1`).
///
/// It is deliberately conservative (it overestimates): a pre-check that underestimates would let an oversized
/// request through to fail inside the backend. One token per 3 UTF-8 bytes of text (English averages ~4), plus
/// 4 tokens per item for the chat template's framing, plus 765 tokens per image (OpenAI's figure for a
/// 512-px tile at high detail).
enum InputEstimate {
    /// What a part of the input adds to the estimate: fixed tokens (framing, images) and text bytes. Costs add up,
    /// so `truncation: "auto"` prices every item once and sums the turns it keeps.
    struct Cost {
        var tokens = 0
        var bytes = 0

        static func + (lhs: Cost, rhs: Cost) -> Cost { Cost(tokens: lhs.tokens + rhs.tokens, bytes: lhs.bytes + rhs.bytes) }

        /// The estimated tokens of an input that costs this much.
        var estimate: Int { tokens + (bytes + 2) / 3 }
    }

    static func tokens(system: [String], input: [JSONValue]) -> Int {
        input.reduce(cost(system: system)) { $0 + cost(of: $1) }.estimate
    }

    /// The cost of the system text.
    static func cost(system: [String]) -> Cost {
        Cost(tokens: 4 * system.count, bytes: system.reduce(0) { $0 + $1.utf8.count })
    }

    /// The cost of one item of the generation request document's `input`.
    static func cost(of item: JSONValue) -> Cost {
        var cost = Cost(tokens: 4)
        for key in ["arguments", "output", "name"] { cost.bytes += item[key]?.stringValue?.utf8.count ?? 0 }
        for part in item["content"]?.arrayValue ?? [] {
            if part["type"] == "image" {
                cost.tokens += ImageBudget.estimatedTokensPerImage
            } else {
                cost.bytes += part["text"]?.stringValue?.utf8.count ?? 0
            }
        }
        return cost
    }
}
