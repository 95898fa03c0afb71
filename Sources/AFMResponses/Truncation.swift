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

    /// The fewest dropped turns (1...`last`) that the whole input's ratio predicts will fit: the first `k` whose
    /// estimate, scaled by `counted / estimate` (the tokenizer's count of the whole input over its estimate), is
    /// within `limit`; `last` when none is.
    ///
    /// The products are taken in `Double`: `counted` is the backend's number, and a hostile one near `Int.max` must
    /// not overflow and trap afmd (a prediction needs no exactness: the bisection that follows checks it).
    static func predictedCut(estimates: (Int) -> Int, last: Int, counted: Int, estimate: Int, limit: Int) -> Int {
        (1...last).first { k in
            Double(estimates(k)) * Double(counted) <= Double(limit) * Double(estimate)
        } ?? last
    }
}
