// SPDX-License-Identifier: Apache-2.0

/// How a turn may use tools (the turn's tool policy; the step controller turns it into each step's tool mode).
public enum ToolMode: Sendable, Hashable {
    /// The model decides on every step.
    case auto
    /// No tools: they are not even shown to the model.
    case none
    /// The first step must call a tool; later steps may answer.
    case required
    /// The first step must call this tool (the only one offered then); later steps may answer.
    case named(String)
}
