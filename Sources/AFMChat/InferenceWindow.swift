// SPDX-License-Identifier: Apache-2.0

/// Chooses which stored messages go to the model with a new message.
///
/// Rules (issue 9, item 4):
/// - Only complete turns: a user message immediately followed by a `complete` answer. A user message whose
///   answer was interrupted, failed or cut off is left out together with that answer.
/// - At most ``maximumMessages`` messages in the request, the new one included (so 39 turns).
/// - At most ``maximumImages`` images across the request: the new message's images count first, then the
///   longest contiguous suffix of turns that fits.
/// - ``retryTurnCount(after:)`` halves the older turns after a `context_length_exceeded`, down to none.
///
/// The stored conversation never changes because of this selection.
public struct InferenceWindow: Sendable, Hashable {
    /// The most messages sent in one request, the new one included.
    public static let maximumMessages = 80
    /// The most images sent in one request.
    public static let maximumImages = 4

    /// The turns sent (user, answer), oldest first.
    public var turns: [Turn]
    /// Complete turns that exist but were left out (by the message or image limits, or a retry).
    public var omittedTurnCount: Int

    /// One complete user/assistant exchange.
    public struct Turn: Sendable, Hashable {
        public var user: ChatMessage
        public var answer: ChatMessage
    }

    public init(turns: [Turn], omittedTurnCount: Int) {
        self.turns = turns
        self.omittedTurnCount = omittedTurnCount
    }

    /// The complete turns of `history` (messages in sequence order), oldest first.
    public static func completeTurns(in history: [ChatMessage]) -> [Turn] {
        var turns: [Turn] = []
        var index = 0
        while index < history.count {
            let message = history[index]
            if message.author == .user, index + 1 < history.count {
                let next = history[index + 1]
                if next.author == .assistant {
                    if next.state == .complete { turns.append(Turn(user: message, answer: next)) }
                    index += 2
                    continue
                }
            }
            index += 1
        }
        return turns
    }

    /// Selects the window for a new message with `currentImageCount` images.
    ///
    /// - Parameters:
    ///   - history: the conversation's messages before the new one, in sequence order.
    ///   - currentImageCount: images in the new message.
    ///   - turnLimit: at most this many turns (a retry after `context_length_exceeded`); nil for no extra limit.
    /// - Throws: ``HistoryError`` when the new message alone has more than ``maximumImages`` images.
    public static func select(history: [ChatMessage], currentImageCount: Int, turnLimit: Int? = nil) throws -> InferenceWindow {
        guard currentImageCount <= maximumImages else {
            throw HistoryError("a message can carry at most \(maximumImages) images; this one has \(currentImageCount)")
        }
        let all = completeTurns(in: history)
        var limit = (maximumMessages - 1) / 2
        if let turnLimit { limit = min(limit, max(0, turnLimit)) }
        var selected: [Turn] = []
        var images = currentImageCount
        for turn in all.reversed() {
            guard selected.count < limit else { break }
            let turnImages = turn.user.images.count + turn.answer.images.count
            guard images + turnImages <= maximumImages else { break }
            images += turnImages
            selected.append(turn)
        }
        return InferenceWindow(turns: selected.reversed(), omittedTurnCount: all.count - selected.count)
    }

    /// The turn limit for the next attempt after `context_length_exceeded`: half the turns, nil when even the
    /// new message alone was too long (nothing left to drop).
    public static func retryTurnCount(after window: InferenceWindow) -> Int? {
        window.turns.isEmpty ? nil : window.turns.count / 2
    }

    /// The notice shown when older context was left out, nil when everything was sent.
    public var notice: String? {
        guard omittedTurnCount > 0 else { return nil }
        let noun = omittedTurnCount == 1 ? "exchange was" : "exchanges were"
        return "\(omittedTurnCount) older \(noun) left out of the model's context"
    }
}
