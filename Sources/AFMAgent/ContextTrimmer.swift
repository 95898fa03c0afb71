// SPDX-License-Identifier: Apache-2.0
import AFMImages
import AFMJSON

/// Fits a step's input into the model's input budget by leaving out the oldest complete turns (never the
/// current turn, never the instructions). The agent's own history keeps everything; only what the model sees
/// is trimmed.
///
/// Tokens are estimated with the gateway's conservative rule for backends without a tokenizer (docs/
/// responses-api.md, "Budgets"): one token per 3 UTF-8 bytes of text, plus 4 per item, plus 765 per image.
/// Overestimating keeps a trimmed request under the gateway's own check; the gateway has the model's tokenizer
/// and stays the judge.
enum ContextTrimmer {
    /// What the gateway's estimate counts for one image.
    static let imageTokens = ImageBudget.estimatedTokensPerImage

    /// The estimate for one input item (its text, images, arguments, output and name).
    static func tokens(of item: JSONValue) -> Int {
        var bytes = 0
        var images = 0
        for key in ["arguments", "output", "name"] { bytes += item[key]?.stringValue?.utf8.count ?? 0 }
        for part in item["content"]?.arrayValue ?? [] {
            if part["type"] == "input_image" { images += 1 } else { bytes += part["text"]?.stringValue?.utf8.count ?? 0 }
        }
        return 4 + images * imageTokens + (bytes + 2) / 3
    }

    /// The estimate for text outside the items (instructions, tool definitions).
    static func tokens(of text: String) -> Int {
        (text.utf8.count + 2) / 3
    }

    /// The input to send: as many of the newest complete turns of `history` as fit with `current` and
    /// `fixedTokens` in `budget` (nil: no budget known, nothing left out), then `current`.
    static func fit(history: [[JSONValue]], current: [JSONValue], fixedTokens: Int, budget: Int?)
        -> (input: [JSONValue], droppedTurns: Int)
    {
        let turnTokens = history.map { $0.reduce(0) { $0 + tokens(of: $1) } }
        var total = fixedTokens + turnTokens.reduce(0, +) + current.reduce(0) { $0 + tokens(of: $1) }
        var dropped = 0
        if let budget {
            while total > budget && dropped < history.count {
                total -= turnTokens[dropped]
                dropped += 1
            }
        }
        return (history.dropFirst(dropped).flatMap { $0 } + current, dropped)
    }
}
