// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// The backend config document `create()` receives, reduced to the settings the scripted backend understands.
///
/// ```json
/// {"config_version":1,"backend":"scripted","instance":"scripted#2","generation":2,
///  "state_dir":"/var/lib/afm/backends/scripted",
///  "settings":{"Script":"/etc/afm/demo-script.json","RecordFile":"/tmp/rec.jsonl"}}
/// ```
///
/// Settings come from the INI file, so every value is a string; an empty value means "not set".
struct BackendConfig: Sendable {
    /// The only `config_version` this backend reads.
    static let version = 1
    /// The settings this backend accepts; any other key is refused.
    static let knownSettings = ["Script", "RecordFile", "Version", "ContextTokens"]
    /// The context size of models that name none.
    static let defaultContextTokens = 4096

    /// `Script`: the script file to play, or nil for the built-in `scripted-demo` model.
    var scriptPath: String?
    /// `RecordFile`: the JSONL file records are appended to, or nil.
    var recordPath: String?
    /// `Version`: replaces the version in the describe document.
    var version: String?
    /// `ContextTokens`: the default context window.
    var contextTokens: Int
    /// `instance`, for log lines.
    var instance: String
    /// The whole document as compact JSON, for the `create` record.
    var documentJSON: String

    /// Parses and validates a config document.
    ///
    /// - Throws: `AFM_ERR_INVALID_REQUEST` for malformed JSON, a non-string or unknown setting (naming the key) or a
    ///   bad `ContextTokens`; `AFM_ERR_INCOMPATIBLE` for a `config_version` other than 1.
    init(parsing bytes: Data) throws(BackendError) {
        let object: [String: Any]
        do {
            object = try JSON.object(from: bytes)
        } catch {
            throw .invalidRequest("backend config document: \(error.message)")
        }
        guard let version = JSON.int(object["config_version"]) else {
            throw .invalidRequest("backend config document: config_version must be an integer")
        }
        guard version == Self.version else {
            throw .incompatible(
                "backend config document has config_version \(version); "
                    + "the scripted backend reads version \(Self.version)"
            )
        }
        var settings: [String: String] = [:]
        if let raw = object["settings"], !JSON.isNullOrMissing(raw) {
            guard let dictionary = JSON.object(raw) else {
                throw .invalidRequest("backend config document: settings must be an object of strings")
            }
            for key in dictionary.keys.sorted() {
                guard Self.knownSettings.contains(key) else {
                    throw .invalidRequest(
                        "unknown setting \"\(key)\" for the scripted backend "
                            + "(known: \(Self.knownSettings.joined(separator: ", ")))"
                    )
                }
                guard let value = JSON.string(dictionary[key]) else {
                    throw .invalidRequest("setting \"\(key)\" must be a string")
                }
                if !value.isEmpty { settings[key] = value }
            }
        }
        var contextTokens = Self.defaultContextTokens
        if let text = settings["ContextTokens"] {
            guard let value = Int(text.trimmingCharacters(in: .whitespaces)),
                (1...ScriptModel.maximumContextTokens).contains(value)
            else {
                throw .invalidRequest(
                    "setting \"ContextTokens\" must be an integer from 1 to \(ScriptModel.maximumContextTokens), "
                        + "not \"\(text)\""
                )
            }
            contextTokens = value
        }
        self.scriptPath = settings["Script"]
        self.recordPath = settings["RecordFile"]
        self.version = settings["Version"]
        self.contextTokens = contextTokens
        self.instance = JSON.string(object["instance"]) ?? JSON.string(object["backend"]) ?? "scripted"
        self.documentJSON = JSON.serialize(object)
    }
}
