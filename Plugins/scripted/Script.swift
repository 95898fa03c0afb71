// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit
import Foundation

/// A script file: the models the scripted backend serves and the steps each one plays.
///
/// ```json
/// {"script_version":1,"models":[{"id":"m","context_tokens":4096,
///   "capabilities":{"streaming":true,"tools":true,"vision":false,"reasoning":false},
///   "steps":[{"text":"Hello"},{"finish":"stop"}]}]}
/// ```
struct Script: Sendable, Hashable {
    /// The only `script_version` this backend reads.
    static let version = 1

    /// The models, in file order; ids are unique.
    var models: [ScriptModel]

    /// The built-in script: one `scripted-demo` model that echoes.
    static func demo(contextTokens: Int) -> Script {
        Script(models: [.demo(contextTokens: contextTokens)])
    }

    init(models: [ScriptModel]) {
        self.models = models
    }

    /// Reads and validates the script at `path`.
    ///
    /// - Throws: `AFM_ERR_MODEL_UNAVAILABLE` when the file cannot be read; `AFM_ERR_INVALID_REQUEST` naming the
    ///   file, the location inside it and the problem when it is malformed.
    init(contentsOf path: String, defaultContextTokens: Int) throws(BackendError) {
        let data: Data
        do {
            data = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            // Foundation's message ("The file doesn't exist.") hides errno; access(2) names the real reason.
            let reason =
                access(path, R_OK) == 0 ? (error as NSError).localizedDescription : String(cString: strerror(errno))
            throw .modelUnavailable("script \(path): cannot read the file (\(reason))")
        }
        let object: [String: Any]
        do {
            object = try JSON.object(from: data)
        } catch {
            throw .invalidRequest("script \(path): \(error.message)")
        }
        do {
            try self.init(parsing: object, defaultContextTokens: defaultContextTokens)
        } catch {
            throw .invalidRequest("script \(path): \(error.path): \(error.problem)")
        }
    }

    /// Validates a parsed script document.
    init(parsing object: [String: Any], defaultContextTokens: Int) throws(ScriptStep.ParseError) {
        if let unknown = object.keys.sorted().first(where: { !["script_version", "models", "comment"].contains($0) }) {
            throw ScriptStep.ParseError(path: unknown, problem: "unknown key (expected script_version, models)")
        }
        guard let version = JSON.int(object["script_version"]) else {
            throw ScriptStep.ParseError(path: "script_version", problem: "must be the integer \(Self.version)")
        }
        guard version == Self.version else {
            throw ScriptStep.ParseError(
                path: "script_version", problem: "is \(version), but this backend reads version \(Self.version)")
        }
        guard let items = JSON.array(object["models"]), !items.isEmpty else {
            throw ScriptStep.ParseError(path: "models", problem: "must be a non-empty array of model objects")
        }
        var models: [ScriptModel] = []
        var seen: Set<String> = []
        for (index, item) in items.enumerated() {
            let model = try ScriptModel(
                parsing: item, at: "models[\(index)]", defaultContextTokens: defaultContextTokens)
            guard seen.insert(model.id).inserted else {
                throw ScriptStep.ParseError(path: "models[\(index)].id", problem: "duplicate model id \"\(model.id)\"")
            }
            models.append(model)
        }
        self.models = models
    }

    /// The model with this id, or nil.
    func model(withID id: String) -> ScriptModel? {
        models.first(where: { $0.id == id })
    }
}
