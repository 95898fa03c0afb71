// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A finished tool call: the call, its output and how long it took.
public struct ToolCallRecord: Sendable, Hashable {
    public var call: AgentToolCall
    public var output: AgentToolOutput
    /// Whether the host ran it (an external tool).
    public var isExternal: Bool
    /// From the start of the call to its output, in milliseconds.
    public var durationMilliseconds: Int

    public init(call: AgentToolCall, output: AgentToolOutput, isExternal: Bool, durationMilliseconds: Int) {
        self.call = call
        self.output = output
        self.isExternal = isExternal
        self.durationMilliseconds = durationMilliseconds
    }

    /// The call's fields, then `output`, `is_external` and `duration_ms`.
    public var json: JSONValue {
        guard case .object(var object) = call.json else { return call.json }
        object["output"] = output.json
        object["is_external"] = .bool(isExternal)
        object["duration_ms"] = .number(JSONNumber(durationMilliseconds))
        return .object(object)
    }
}
