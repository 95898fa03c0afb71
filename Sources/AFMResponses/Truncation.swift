// SPDX-License-Identifier: Apache-2.0

/// `truncation: "auto"`: the original agent runtime's context policy. The conversation is split into turns,
/// each starting at a user message; the oldest complete turn is dropped first. Instructions (system text) are
/// never dropped, and neither is the current turn (the last user message and everything after it).
enum Truncation {
    /// Where each turn starts: the indices of the user messages among `items`. Dropping the `k` oldest turns keeps
    /// `items[starts[k]...]` (the first turn also takes whatever precedes the first user message), for `k` up to
    /// `starts.count - 1`; fewer than two starts leave nothing to drop.
    static func turnStarts(_ items: [ResponsesRequest.Item]) -> [Int] {
        items.indices.filter { index in
            if case .message(let role, _) = items[index], role == "user" { return true }
            return false
        }
    }
}
