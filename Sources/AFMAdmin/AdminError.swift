// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// A varlink error reply: a reverse-domain name and parameters, for example
/// `{"error":"org.afm.Admin.PermissionDenied","parameters":{"required":"admin","granted":"user"}}`.
///
/// Handlers throw these; the server sends them; the client throws them back out.
public struct AdminError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The error name.
    public var name: String
    /// The error's parameters (`message` by convention carries a human sentence).
    public var parameters: JSONObject

    /// Creates an error.
    public init(_ name: String, _ parameters: JSONObject = [:]) {
        self.name = name
        self.parameters = parameters
    }

    /// The human message, when the parameters carry one.
    public var message: String? { parameters["message"]?.stringValue }

    public var description: String {
        let extra = parameters.filter { $0.key != "message" }.map { "\($0.key)=\($0.value.jsonString)" }
        return ([message ?? name] + (message == nil ? [] : ["(\(name))"]) + extra).joined(separator: " ")
    }

    // MARK: - org.varlink.service errors

    /// The method's interface is not served here.
    public static func interfaceNotFound(_ interface: String) -> AdminError {
        AdminError("org.varlink.service.InterfaceNotFound", ["interface": .string(interface)])
    }

    /// The interface exists, the method does not.
    public static func methodNotFound(_ method: String) -> AdminError {
        AdminError("org.varlink.service.MethodNotFound", ["method": .string(method)])
    }

    /// A parameter is missing or has the wrong type or value.
    public static func invalidParameter(_ parameter: String, _ message: String) -> AdminError {
        AdminError("org.varlink.service.InvalidParameter", ["parameter": .string(parameter), "message": .string(message)])
    }

    // MARK: - org.afm.Admin errors

    /// The peer's level is below the method's minimum.
    public static func permissionDenied(method: String, required: AdminLevel, granted: AdminLevel) -> AdminError {
        AdminError(
            "org.afm.Admin.PermissionDenied",
            [
                "method": .string(method), "required": .string(required.description), "granted": .string(granted.description),
                "message": .string("\(method) needs the \(required) level; this connection has \(granted)"),
            ])
    }

    /// The frame was not a JSON object with a `method` string.
    public static func malformedCall(_ message: String) -> AdminError {
        AdminError("org.afm.Admin.MalformedCall", ["message": .string(message)])
    }

    /// A frame exceeded the size limit; the connection is closed after this reply.
    public static func frameTooLarge(limit: Int) -> AdminError {
        AdminError(
            "org.afm.Admin.FrameTooLarge",
            ["limit": .number(JSONNumber(limit)), "message": .string("a call may be at most \(limit) bytes")])
    }

    /// The server has too many connections, or the peer's user holds as many as one user may (`perUser`); this
    /// one is closed after the reply. `limit` is the cap that applied, `scope` says which: `server` or `user`.
    public static func tooManyConnections(limit: Int, perUser: Bool = false) -> AdminError {
        let message = perUser
            ? "one user may hold at most \(limit) connections to the admin socket" : "the admin socket serves at most \(limit) clients"
        return AdminError(
            "org.afm.Admin.TooManyConnections",
            ["limit": .number(JSONNumber(limit)), "scope": .string(perUser ? "user" : "server"), "message": .string(message)])
    }

    /// A reload failed; `activeGeneration` keeps serving.
    public static func reloadFailed(reason: String, backend: String?, activeGeneration: Int?) -> AdminError {
        var parameters: JSONObject = ["message": .string(reason)]
        if let backend { parameters["backend"] = .string(backend) }
        parameters["activeGeneration"] = activeGeneration.map { .number(JSONNumber($0)) } ?? .null
        return AdminError("org.afm.Admin.ReloadFailed", parameters)
    }

    /// A setting or prompt edit was refused; the last valid value stays.
    public static func invalidSetting(key: String, message: String) -> AdminError {
        AdminError("org.afm.Admin.InvalidSetting", ["key": .string(key), "message": .string(message)])
    }

    /// An edit was saved and is in force, but the file may not survive a crash of the machine (the `fsync` of
    /// its directory failed after the rename). Not an invalid value: reading the settings shows the edit.
    public static func settingNotDurable(key: String, message: String, revision: Int) -> AdminError {
        AdminError(
            "org.afm.Admin.SettingNotDurable",
            ["key": .string(key), "revision": .number(JSONNumber(revision)), "message": .string(message)])
    }

    /// Something failed inside the daemon.
    public static func internalError(_ message: String) -> AdminError {
        AdminError("org.afm.Admin.InternalError", ["message": .string(message)])
    }

    /// The reply as a varlink message object.
    var reply: JSONValue { ["error": .string(name), "parameters": .object(parameters)] }
}
