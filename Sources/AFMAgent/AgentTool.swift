// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A function the model may call: its name, description and JSON Schema parameters, and who runs it.
///
/// A **local** tool runs its handler in this process (with a timeout); an **external** tool is run by the host:
/// the turn emits ``AgentEvent/toolCallRequested(_:)`` and waits until the host calls
/// ``AgentRun/submit(_:for:)`` (or the wait times out, is cancelled, or the turn ends).
public struct AgentTool: Sendable {
    /// A local tool's handler: gets the parsed arguments (a JSON object), returns the output. A thrown error
    /// becomes an error output. At a timeout or a cancel the model gets an error output at once and the handler's
    /// task is cancelled; the turn reports its end only after the handler returned, so a handler should honour
    /// cancellation (`Task.sleep`, `Task.checkCancellation()`).
    public typealias Handler = @Sendable (_ arguments: JSONValue) async throws -> AgentToolOutput

    /// Who runs the tool.
    public enum Execution: Sendable {
        case local(Handler)
        case external
    }

    /// The function name the model calls (letters, digits, `_` and `-`).
    public var name: String
    public var description: String
    /// The JSON Schema of the arguments (an object schema in the gateway's tool subset).
    public var parameters: JSONValue
    public var execution: Execution
    /// How long a call may take; nil uses the turn policy's ``TurnPolicy/toolTimeout`` (local) or
    /// ``TurnPolicy/externalToolTimeout`` (external).
    public var timeout: Duration?

    public init(name: String, description: String, parameters: JSONValue, execution: Execution, timeout: Duration? = nil) {
        self.name = name
        self.description = description
        self.parameters = parameters
        self.execution = execution
        self.timeout = timeout
    }

    /// A tool run in this process by `handler`.
    public static func local(
        name: String, description: String, parameters: JSONValue, timeout: Duration? = nil, handler: @escaping Handler
    ) -> AgentTool {
        AgentTool(name: name, description: description, parameters: parameters, execution: .local(handler), timeout: timeout)
    }

    /// A tool the host runs (see ``AgentRun/submit(_:for:)``).
    public static func external(name: String, description: String, parameters: JSONValue, timeout: Duration? = nil) -> AgentTool {
        AgentTool(name: name, description: description, parameters: parameters, execution: .external, timeout: timeout)
    }

    /// Whether the host runs it.
    public var isExternal: Bool {
        if case .external = execution { return true }
        return false
    }

    /// The Responses API tool definition: `{"type":"function","name","description","parameters"}`.
    public var definition: JSONValue {
        ["type": "function", "name": .string(name), "description": .string(description), "parameters": parameters]
    }
}
