// SPDX-License-Identifier: Apache-2.0

/// Who an NPC is: a name, traits, a voice, goals and a background, turned into the instructions of its agent.
///
/// The text is plain and short on purpose: small local models follow a few direct sentences better than a long
/// character sheet.
public struct Persona: Sendable, Hashable {
    public var name: String
    /// Adjectives or short phrases ("gruff", "loyal to the baron").
    public var traits: [String]
    /// How the NPC speaks ("short sentences, old-fashioned words").
    public var voice: String?
    /// What the NPC wants, most important first.
    public var goals: [String]
    /// Who the NPC is and what it knows.
    public var background: String?

    public init(name: String, traits: [String] = [], voice: String? = nil, goals: [String] = [], background: String? = nil) {
        self.name = name
        self.traits = traits
        self.voice = voice
        self.goals = goals
        self.background = background
    }

    /// The NPC agent's instructions.
    public var instructions: String {
        var lines = [
            "You are \(name), a character in a game. Stay in character: speak as \(name), in the first person, "
                + "never as an assistant or an AI."
        ]
        if let background, !background.isEmpty { lines.append("Background: \(background)") }
        if !traits.isEmpty { lines.append("Traits: \(traits.joined(separator: ", ")).") }
        if let voice, !voice.isEmpty { lines.append("Voice: \(voice)") }
        if !goals.isEmpty { lines.append("Goals: \(goals.joined(separator: "; ")).") }
        lines.append("Answer with a few sentences of dialogue at most.")
        return lines.joined(separator: "\n")
    }
}
