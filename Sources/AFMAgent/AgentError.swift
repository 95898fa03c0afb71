// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Why a turn failed: a stable ``code``, a message for people, and what the gateway said when it was the
/// gateway's error.
public struct AgentError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: AgentErrorCode
    public var message: String
    /// The gateway's own `error.code` (`invalid_value`, `context_length_exceeded`, …), when it sent one.
    public var gatewayCode: String?
    /// The request field the gateway named (`param`), if any.
    public var param: String?

    public init(_ code: AgentErrorCode, _ message: String, gatewayCode: String? = nil, param: String? = nil) {
        self.code = code
        self.message = message
        self.gatewayCode = gatewayCode
        self.param = param
    }

    /// An error the gateway reported with `code`, mapped to the agent's codes.
    public init(gatewayCode: String, message: String, param: String? = nil) {
        self.init(AgentErrorCode(gatewayCode: gatewayCode), message, gatewayCode: gatewayCode, param: param)
    }

    /// The turn was cancelled by the host.
    public static let cancelled = AgentError(.cancelled, "the turn was cancelled")

    public var description: String { "\(code.rawValue): \(message)" }

    /// `{"code":…,"message":…,"gateway_code":…,"param":…}` (absent fields left out).
    public var json: JSONValue {
        var object: JSONObject = ["code": .string(code.rawValue), "message": .string(message)]
        if let gatewayCode { object["gateway_code"] = .string(gatewayCode) }
        if let param { object["param"] = .string(param) }
        return .object(object)
    }
}
