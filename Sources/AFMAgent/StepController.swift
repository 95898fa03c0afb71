// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Edits every model step's request (agents.md §1.4): counts tool rounds and calls since the prompt and decides
/// the step's tool mode and offered tools.
///
/// ```
/// policy none, no tools, or budget spent ─► disallowed: no tools, no tool_choice (the model cannot stall on them)
/// step 0 and required                    ─► required:   every tool, tool_choice "required"
/// step 0 and named(T)                    ─► required:   only T, tool_choice {type:function, name:T}
/// otherwise                              ─► allowed:    every tool, tool_choice "auto"
/// ```
///
/// Forcing a tool on every step would leave the model unable to answer; so `required`/named apply to step 0
/// only (openai-agents' `reset_tool_choice=True`). A value type with no I/O: tests drive it directly.
struct StepController: Sendable {
    /// The tool mode of one step.
    enum Mode: String, Sendable, Hashable {
        case disallowed, required, allowed
    }

    /// What one step's request carries.
    struct Plan: Sendable {
        var mode: Mode
        /// The tools offered (empty when disallowed).
        var tools: [AgentTool]
        /// The request's `tool_choice`; nil leaves it out (a disallowed step sends no tool fields at all).
        var toolChoice: JSONValue?
    }

    let policy: TurnPolicy
    let tools: [AgentTool]
    /// The step about to be planned (0-based).
    private(set) var step = 0
    /// Steps that made at least one tool call.
    private(set) var toolRounds = 0
    /// Tool calls made since the prompt (calls refused over budget included).
    private(set) var callsMade = 0

    init(policy: TurnPolicy, tools: [AgentTool]) {
        self.policy = policy
        self.tools = tools
    }

    /// Whether the call budget is spent.
    var budgetSpent: Bool { policy.maxToolCalls.map { callsMade >= $0 } ?? false }

    /// How many more calls the budget allows (nil: unlimited).
    var remainingCalls: Int? { policy.maxToolCalls.map { max(0, $0 - callsMade) } }

    /// The plan of the current step.
    func plan() -> Plan {
        if tools.isEmpty || policy.toolMode == .none || budgetSpent {
            return Plan(mode: .disallowed, tools: [], toolChoice: nil)
        }
        if step == 0 {
            switch policy.toolMode {
            case .required:
                return Plan(mode: .required, tools: tools, toolChoice: "required")
            case .named(let name):
                return Plan(
                    mode: .required, tools: tools.filter { $0.name == name },
                    toolChoice: ["type": "function", "name": .string(name)])
            case .auto, .none:
                break
            }
        }
        return Plan(mode: .allowed, tools: tools, toolChoice: "auto")
    }

    /// Moves to the next step after one that made `calls` tool calls.
    mutating func finishStep(calls: Int) {
        step += 1
        if calls > 0 {
            toolRounds += 1
            callsMade += calls
        }
    }
}
