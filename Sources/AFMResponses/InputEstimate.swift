// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// The input-token estimate used when a backend offers no tokenizer (`afm.tokenize/1`).
///
/// It is deliberately conservative (it overestimates): a pre-check that underestimates would let an oversized
/// request through to fail inside the backend. One token per 3 UTF-8 bytes of text (English averages ~4), plus
/// 4 tokens per item for the chat template's framing, plus 765 tokens per image (OpenAI's figure for a
/// 512-px tile at high detail).
enum InputEstimate {
    static func tokens(system: [String], input: [JSONValue]) -> Int {
        var bytes = system.reduce(0) { $0 + $1.utf8.count }
        var tokens = 4 * system.count
        for item in input {
            tokens += 4
            for key in ["arguments", "output", "name"] { bytes += item[key]?.stringValue?.utf8.count ?? 0 }
            for part in item["content"]?.arrayValue ?? [] {
                if part["type"] == "image" {
                    tokens += 765
                } else {
                    bytes += part["text"]?.stringValue?.utf8.count ?? 0
                }
            }
        }
        return tokens + (bytes + 2) / 3
    }
}
