// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem

/// The versioned settings entry `AFM.serverSettings.v1`: what the admin socket changes, kept in the control layer.
///
/// Every field is optional: an absent field leaves the lower layers' value in force.
///
/// ```json
/// {"schema":"AFM.serverSettings.v1","version":1,"revision":4,"host":"192.168.1.20","port":11535,
///  "privateCloudPreference":false,"commonPrompt":"Be brief."}
/// ```
/// Version 0 (files without `version`) looked like `{"listen":"HOST:PORT","cloud":"on"|"off","prompt":"…"}`
/// and is migrated on read (``init(json:)``); a version above ``currentVersion`` is refused.
public struct ServerSettings: Sendable, Hashable {
    /// The schema name stored in the file.
    public static let schemaName = "AFM.serverSettings.v1"
    /// The version this build writes.
    public static let currentVersion = 1

    /// The listen host (an IP literal or `localhost`).
    public var host: String?
    /// The last valid listen port (1…65535).
    public var port: Int?
    /// Prefer the private-cloud backend for unqualified model names.
    public var privateCloudPreference: Bool?
    /// The common prompt prepended to every request.
    public var commonPrompt: String?
    /// Incremented on every successful write; used for `SetPrompt`'s optimistic concurrency.
    public var revision: Int = 0

    /// The largest revision a settings file may hold: 2^53 − 1, the largest integer every JSON reader keeps
    /// exactly. A file beyond it (or with a negative revision) is corrupt; an edit at it is refused.
    public static let maximumRevision = 9_007_199_254_740_991
    /// The version the settings were read from (0 for a migrated v0 file); always written as ``currentVersion``.
    public var migratedFromVersion: Int?

    /// Empty settings (every field absent).
    public init() {}

    /// The names accepted by ``SettingsStore/set(_:to:)`` and `afmctl settings set`, with aliases.
    public static let settingNames: [String: String] = [
        "host": "host", "port": "port", "listen": "listen", "Server.Listen": "listen",
        "privateCloudPreference": "privateCloudPreference", "cloud": "privateCloudPreference",
        "Cloud.Preference": "privateCloudPreference",
        "commonPrompt": "commonPrompt", "prompt": "commonPrompt", "Responses.CommonPrompt": "commonPrompt",
    ]

    /// Reads a settings document of any known version.
    ///
    /// - Throws: ``SettingsError`` when the document is not an object, has a newer version, or a field has
    ///   the wrong type or an invalid value.
    public init(json: JSONValue) throws(SettingsError) {
        guard case .object(let object) = json else { throw .corrupt("the settings file must hold a JSON object") }
        let version: Int
        if let value = object["version"] {
            guard let number = value.numberValue?.intValue else { throw .corrupt("'version' must be an integer") }
            version = number
        } else {
            version = 0
        }
        switch version {
        case 0:
            migratedFromVersion = 0
            if let listen = object["listen"] {
                guard let text = listen.stringValue, let address = HostPort(text) else {
                    throw .corrupt("v0 'listen' must be \"HOST:PORT\"")
                }
                host = address.host
                port = address.port == 0 ? nil : address.port
            }
            if let cloud = object["cloud"] {
                guard let text = cloud.stringValue ?? cloud.boolValue.map({ $0 ? "on" : "off" }),
                    let flag = ConfigValueType.parseBool(text)
                else { throw .corrupt("v0 'cloud' must be \"on\" or \"off\"") }
                privateCloudPreference = flag
            }
            if let prompt = object["prompt"] {
                guard let text = prompt.stringValue else { throw .corrupt("v0 'prompt' must be a string") }
                commonPrompt = text
            }
        case 1:
            if let schema = object["schema"], schema.stringValue != Self.schemaName {
                throw .corrupt("'schema' must be \"\(Self.schemaName)\"")
            }
            // A hand edit may leave the revision out (0); anything else must count edits: an integer
            // from 0 to `maximumRevision`, so the next edit's `+ 1` cannot overflow.
            if let value = object["revision"], !value.isNull {
                guard let number = value.numberValue?.intValue, (0...Self.maximumRevision).contains(number) else {
                    throw .corrupt("'revision' must be an integer from 0 to \(Self.maximumRevision), not \(value.jsonString)")
                }
                revision = number
            }
            if let value = object["host"], !value.isNull {
                guard let text = value.stringValue else { throw .corrupt("'host' must be a string") }
                host = text
            }
            if let value = object["port"], !value.isNull {
                guard let number = value.numberValue?.intValue else { throw .corrupt("'port' must be an integer") }
                port = number
            }
            if let value = object["privateCloudPreference"], !value.isNull {
                guard let flag = value.boolValue else { throw .corrupt("'privateCloudPreference' must be true or false") }
                privateCloudPreference = flag
            }
            if let value = object["commonPrompt"], !value.isNull {
                guard let text = value.stringValue else { throw .corrupt("'commonPrompt' must be a string") }
                commonPrompt = text
            }
        default:
            throw .newerVersion(version)
        }
        if let host, let problem = Self.problem(host: host) { throw .corrupt(problem) }
        if let port, let problem = Self.problem(port: port) { throw .corrupt(problem) }
    }

    /// The v1 document.
    public var json: JSONValue {
        var object: JSONObject = [
            "schema": .string(Self.schemaName),
            "version": .number(JSONNumber(Self.currentVersion)),
            "revision": .number(JSONNumber(revision)),
        ]
        if let host { object["host"] = .string(host) }
        if let port { object["port"] = .number(JSONNumber(port)) }
        if let privateCloudPreference { object["privateCloudPreference"] = .bool(privateCloudPreference) }
        if let commonPrompt { object["commonPrompt"] = .string(commonPrompt) }
        return .object(object)
    }

    /// Applies one edit by setting name (see ``settingNames``), validating it first.
    ///
    /// - Throws: ``SettingsError/invalidValue(setting:message:)`` or ``SettingsError/unknownSetting(_:)``;
    ///   on error `self` is unchanged.
    public mutating func apply(_ name: String, _ value: String) throws(SettingsError) {
        guard let canonical = Self.settingNames[name] else { throw .unknownSetting(name) }
        switch canonical {
        case "host":
            if let problem = Self.problem(host: value) { throw .invalidValue(setting: name, message: problem) }
            host = Self.unbracketed(value)
        case "port":
            guard let number = Int(value) else {
                throw .invalidValue(setting: name, message: "port must be a number between 1 and 65535, not '\(value)'")
            }
            if let problem = Self.problem(port: number) { throw .invalidValue(setting: name, message: problem) }
            port = number
        case "listen":
            guard let address = HostPort(value) else {
                throw .invalidValue(setting: name, message: "listen must be HOST:PORT, not '\(value)'")
            }
            if let problem = Self.problem(host: address.host) { throw .invalidValue(setting: name, message: problem) }
            if let problem = Self.problem(port: address.port) { throw .invalidValue(setting: name, message: problem) }
            host = address.host
            port = address.port
        case "privateCloudPreference":
            guard let flag = ConfigValueType.parseBool(value) else {
                throw .invalidValue(setting: name, message: "must be yes or no, not '\(value)'")
            }
            privateCloudPreference = flag
        default:
            commonPrompt = value
        }
    }

    /// Why `host` cannot be saved, or `nil`: it must be an IPv4/IPv6 literal or `localhost` (the listener does
    /// not resolve names). A literal whose interface is missing right now is valid: it is kept, and the bind
    /// failure is reported (``SettingsStore/recordBindFailure(_:)``).
    public static func problem(host: String) -> String? {
        let bare = unbracketed(host)
        if bare == "localhost" || SocketAddress(host: bare, port: 0) != nil { return nil }
        return "host must be an IPv4 or IPv6 address or localhost, not '\(host)'"
    }

    /// Why `port` cannot be saved, or `nil`.
    public static func problem(port: Int) -> String? {
        (1...65535).contains(port) ? nil : "port must be between 1 and 65535, not \(port)"
    }

    private static func unbracketed(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }
}
