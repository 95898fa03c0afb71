// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON

/// A JSON-RPC 2.0 error object: a code, a message and optional data.
///
/// The standard codes (−32700 parse error, −32600 invalid request, −32601 method not found, −32602 invalid
/// params, −32603 internal error), and the implementation's own in −32000…−32099: `AgentError` codes at
/// −32001…−32012 (``AgentErrorCode/jsonRPCCode``) with the string code in `data.code`, and −32000 for the
/// bridge's own refusals (`data.code` says which).
public struct JSONRPCError: Error, Sendable, Hashable {
    public var code: Int
    public var message: String
    public var data: JSONValue?

    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    public static let parseErrorCode = -32700
    public static let invalidRequestCode = -32600
    public static let methodNotFoundCode = -32601
    public static let invalidParamsCode = -32602
    public static let internalErrorCode = -32603
    /// The bridge's own refusals (`data.code`: `shut_down`, `limit_reached`).
    public static let bridgeErrorCode = -32000

    /// The message is not JSON (or not UTF-8, or uses another framing).
    public static func parseError(_ message: String) -> JSONRPCError {
        JSONRPCError(code: parseErrorCode, message: message)
    }

    /// The message is JSON but not a JSON-RPC 2.0 request.
    public static func invalidRequest(_ message: String) -> JSONRPCError {
        JSONRPCError(code: invalidRequestCode, message: message)
    }

    public static func methodNotFound(_ method: String) -> JSONRPCError {
        JSONRPCError(
            code: methodNotFoundCode, message: "no method \"\(method.prefix(100))\" (see docs/bridge.md)",
            data: ["method": .string(String(method.prefix(100)))])
    }

    /// A parameter is missing, of the wrong type or out of range; `field` names it (`tools[0].name`).
    public static func invalidParams(_ field: String, _ problem: String) -> JSONRPCError {
        JSONRPCError(code: invalidParamsCode, message: "\(field): \(problem)", data: ["field": .string(field)])
    }

    public static func internalError(_ message: String) -> JSONRPCError {
        JSONRPCError(code: internalErrorCode, message: message)
    }

    /// A bridge refusal with its string code in `data.code`.
    public static func bridge(_ code: String, _ message: String) -> JSONRPCError {
        JSONRPCError(code: bridgeErrorCode, message: message, data: ["code": .string(code)])
    }

    /// An agent error: its JSON-RPC number, its message, and `data` = the error's JSON (`code`, `message`,
    /// `gateway_code`, `param`).
    public init(_ error: AgentError) {
        self.init(code: error.code.jsonRPCCode, message: error.message, data: error.json)
    }

    /// `{"code":…,"message":…,"data":…}`.
    public var json: JSONValue {
        var object: JSONObject = ["code": .number(JSONNumber(code)), "message": .string(message)]
        if let data { object["data"] = data }
        return .object(object)
    }
}
