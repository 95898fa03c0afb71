// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// What an NPC decided: one of the options the game offered, and why.
public struct Decision: Sendable, Hashable {
    /// The NPC's reasons, written before the choice (the model writes in the schema's order).
    public var reasoning: String
    /// One of the offered options, exactly as offered.
    public var choice: String

    public init(reasoning: String, choice: String) {
        self.reasoning = reasoning
        self.choice = choice
    }

    /// `{"reasoning":…,"choice":…}`.
    public var json: JSONValue {
        ["reasoning": .string(reasoning), "choice": .string(choice)]
    }
}
