// SPDX-License-Identifier: Apache-2.0

/// `truncation: "auto"`: the original agent runtime's context policy. The conversation is split into turns,
/// each starting at a user message; the oldest complete turn is dropped first. Instructions (system text) are
/// never dropped, and neither is the current turn (the last user message and everything after it).
enum Truncation {
    /// The items without their oldest complete turn, or nil when only the current turn is left.
    static func droppingOldestTurn(_ items: [ResponsesRequest.Item]) -> [ResponsesRequest.Item]? {
        let starts = items.indices.filter { index in
            if case .message(let role, _) = items[index], role == "user" { return true }
            return false
        }
        // Turn boundaries: the first turn also takes whatever precedes the first user message.
        guard starts.count >= 2 else { return nil }
        return Array(items[starts[1]...])
    }
}
