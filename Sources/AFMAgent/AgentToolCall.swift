// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A tool call the model made.
public struct AgentToolCall: Sendable, Hashable {
    /// The id the output must answer (`call_id`).
    public var callID: String
    public var name: String
    /// The arguments as the model wrote them (JSON text).
    public var arguments: String
    /// The model step (0-based) that made the call.
    public var step: Int

    public init(callID: String, name: String, arguments: String, step: Int) {
        self.callID = callID
        self.name = name
        self.arguments = arguments
        self.step = step
    }

    /// `{"call_id":…,"name":…,"arguments":…,"step":…}`.
    public var json: JSONValue {
        ["call_id": .string(callID), "name": .string(name), "arguments": .string(arguments), "step": .number(JSONNumber(step))]
    }
}
