// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON

/// Decisions as schema turns (agents.md §10): the game offers options, the model answers
/// `{"reasoning": …, "choice": …}` with `reasoning` first (the model writes in order, so it reasons before it
/// chooses) and `choice` an `enum` of the options, which the gateway enforces while the model writes.
public enum DecisionEngine {
    /// The most options one decision may offer.
    public static let maxOptions = 64
    /// The longest option, in bytes.
    public static let maxOptionBytes = 200

    /// Checks the options the game offers: 1 to ``maxOptions`` distinct, non-empty strings of at most
    /// ``maxOptionBytes`` bytes.
    public static func validate(options: [String]) throws(AgentError) {
        guard !options.isEmpty else { throw AgentError(.invalidRequest, "options must offer at least one choice") }
        guard options.count <= maxOptions else {
            throw AgentError(.invalidRequest, "options offers \(options.count) choices; at most \(maxOptions) are allowed")
        }
        var seen = Set<String>()
        for (index, option) in options.enumerated() {
            guard !option.isEmpty, option.utf8.count <= maxOptionBytes else {
                throw AgentError(.invalidRequest, "options[\(index)] must be 1 to \(maxOptionBytes) bytes long")
            }
            guard seen.insert(option).inserted else {
                throw AgentError(.invalidRequest, "options[\(index)] repeats \"\(option)\"; every option must be distinct")
            }
        }
    }

    /// The answer's schema: `reasoning` (a string) first, then `choice`, one of `options`.
    public static func schema(options: [String]) -> AgentSchema {
        AgentSchema(
            name: "decision",
            schema: [
                "type": "object",
                "properties": [
                    "reasoning": ["type": "string", "description": "Why, in one or two sentences, in character."],
                    "choice": ["type": "string", "enum": .array(options.map(JSONValue.string))],
                ],
                "required": ["reasoning", "choice"],
                "additionalProperties": false,
            ])
    }

    /// The turn's prompt: the situation and the options, one per line.
    public static func prompt(situation: String, options: [String]) -> String {
        var text = situation.isEmpty ? "Decide what to do." : situation
        text += "\n\nChoose exactly one of these options:\n"
        text += options.map { "- \($0)" }.joined(separator: "\n")
        text += "\n\nAnswer with your reasoning first, then your choice, copied exactly."
        return text
    }

    /// A decision turn's policy: the schema, and no tools (a decision is an answer, not an action).
    public static func policy(options: [String], base: TurnPolicy) -> TurnPolicy {
        var policy = base
        policy.schema = schema(options: options)
        policy.toolMode = .none
        return policy
    }

    /// The decision in a schema turn's response; `invalid_schema` when the answer lacks a field or chose
    /// something that was not offered.
    public static func decision(from response: AgentResponse, options: [String]) throws(AgentError) -> Decision {
        guard let json = response.json, let choice = json["choice"]?.stringValue else {
            throw AgentError(.invalidSchema, "the decision has no choice: \(response.text.prefix(200))")
        }
        guard options.contains(choice) else {
            throw AgentError(.invalidSchema, "the decision chose \"\(choice.prefix(200))\", which is not one of the options")
        }
        return Decision(reasoning: json["reasoning"]?.stringValue ?? "", choice: choice)
    }
}
