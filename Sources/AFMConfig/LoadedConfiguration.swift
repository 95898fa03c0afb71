// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

/// The effective configuration: every schema key (and every `[Backend.<id>]` setting) with its value, origin
/// and the values it shadows, plus typed accessors.
///
/// Values were validated when loaded, so the typed accessors cannot fail for schema keys.
public struct LoadedConfiguration: Sendable {
    /// The paths the configuration was read with.
    public let paths: ConfigPaths
    /// The main file that was read, if any.
    public let mainFile: String?
    /// The drop-ins that were read, in application order.
    public let dropIns: [String]
    /// The control-layer file, when it existed.
    public let controlFile: String?
    /// Things worth logging that are not errors (ignored `AFM_*` variables).
    public let warnings: [String]
    private let entries: [String: ConfigEntry]
    private let order: [String]
    /// Backend setting name → (backend id, key), for names read from a `[Backend.<id>]` section.
    private let backendNames: [String: (backend: String, key: String)]

    init(
        paths: ConfigPaths, mainFile: String?, dropIns: [String], controlFile: String?, entries: [String: ConfigEntry],
        order: [String], backendNames: [String: (backend: String, key: String)] = [:], warnings: [String]
    ) {
        self.paths = paths
        self.mainFile = mainFile
        self.dropIns = dropIns
        self.controlFile = controlFile
        self.entries = entries
        self.order = order
        self.backendNames = backendNames
        self.warnings = warnings
    }

    /// Every file read, lowest layer first (main file, then drop-ins, then the control file).
    public var filesRead: [String] { (mainFile.map { [$0] } ?? []) + dropIns + (controlFile.map { [$0] } ?? []) }

    // MARK: - Generic access

    /// The entry for `name` (`Server.Listen`, `Backend.scripted.Script`), if set.
    public func entry(_ name: String) -> ConfigEntry? { entries[name] }

    /// Where the effective value of `name` came from, or `nil` for an unknown name.
    public func origin(of name: String) -> ConfigOrigin? { entries[name]?.origin }

    /// Where the effective value of `key` came from.
    public func origin(of key: ConfigKey) -> ConfigOrigin { entry(for: key).origin }

    /// Every entry (schema keys in schema order, then backend settings in the order first seen); with
    /// `withOrigin` a specific origin only (for example `.defaultValue` lists what was never set).
    public func values(withOrigin origin: ConfigOrigin? = nil) -> [ConfigEntry] {
        order.compactMap { entries[$0] }.filter { origin == nil || $0.origin == origin }
    }

    /// Entries whose origin is in `layer` (``ConfigOrigin/layer``: `default`, `main`, `drop-in`, `control`,
    /// `environment`, `command-line`).
    public func values(inLayer layer: String) -> [ConfigEntry] {
        values().filter { $0.origin.layer == layer }
    }

    /// The text value of `key`.
    public func string(_ key: ConfigKey) -> String { entry(for: key).value }

    /// The integer value of an `.integer` or `.seconds` key.
    public func integer(_ key: ConfigKey) -> Int {
        // The force unwrap is safe: the loader validated the text against the key's integer type.
        Int(entry(for: key).value)!
    }

    /// The value of a `.seconds` key as a duration.
    public func duration(_ key: ConfigKey) -> Duration { .seconds(integer(key)) }

    /// The value of a `.boolean` key.
    public func bool(_ key: ConfigKey) -> Bool {
        // The force unwrap is safe: the loader validated the text as a boolean.
        ConfigValueType.parseBool(entry(for: key).value)!
    }

    /// The items of a `.list` key.
    public func list(_ key: ConfigKey) -> [String] { ConfigValueType.parseList(entry(for: key).value) }

    /// The value of a `.listenAddress` key.
    public func listenAddress(_ key: ConfigKey) -> ListenAddress {
        // The force unwrap is safe: the loader validated the text as HOST:PORT or unix:PATH.
        ListenAddress(entry(for: key).value)!
    }

    private func entry(for key: ConfigKey) -> ConfigEntry {
        guard let entry = entries[key.name] else { preconditionFailure("\(key.name) is not in ConfigSchema.keys") }
        return entry
    }

    // MARK: - Typed view for the daemon

    /// `Server.Listen`.
    public var listen: ListenAddress { listenAddress(.serverListen) }
    /// `Server.ListenSocketMode`.
    public var listenSocketMode: UInt32 {
        // The force unwrap is safe: the loader validated the text as an octal mode.
        ConfigValueType.parseFileMode(string(.serverListenSocketMode))!
    }
    /// `Server.APIKeyFile`, or nil when empty (no authentication).
    public var apiKeyFile: String? { string(.serverAPIKeyFile).isEmpty ? nil : string(.serverAPIKeyFile) }
    /// `Server.AllowUnauthenticated`.
    public var allowUnauthenticated: Bool { bool(.serverAllowUnauthenticated) }
    /// `Server.MetricsRequireKey`.
    public var metricsRequireKey: Bool { bool(.serverMetricsRequireKey) }
    /// `Server.DrainDelaySeconds`.
    public var drainDelay: Duration { duration(.serverDrainDelay) }
    /// `Server.AccessLog`.
    public var accessLog: Bool { bool(.serverAccessLog) }
    /// `Server.ShutdownTimeoutSeconds`.
    public var shutdownTimeout: Duration { duration(.serverShutdownTimeout) }
    /// `Server.RequestHeaderTimeoutSeconds`.
    public var requestHeaderTimeout: Duration { duration(.serverRequestHeaderTimeout) }
    /// `Server.ProcessingDeadlineSeconds`.
    public var processingDeadline: Duration { duration(.serverProcessingDeadline) }
    /// `Server.IOThreads` (0: automatic).
    public var ioThreads: Int { integer(.serverIOThreads) }
    /// `Server.MaxConnections`.
    public var maxConnections: Int { integer(.serverMaxConnections) }
    /// `Backends.Directory`, or `nil` when empty (the daemon then picks the directory next to its executable).
    public var backendDirectory: String? { string(.backendsDirectory).isEmpty ? nil : string(.backendsDirectory) }
    /// `Backends.Disabled`.
    public var disabledBackends: Set<String> { Set(list(.backendsDisabled)) }
    /// `Backends.SilenceTimeoutSeconds`.
    public var silenceTimeout: Duration { duration(.backendsSilenceTimeout) }
    /// `Backends.CancelGraceSeconds`.
    public var cancelGrace: Duration { duration(.backendsCancelGrace) }
    /// `Backends.DrainTimeoutSeconds`.
    public var drainTimeout: Duration { duration(.backendsDrainTimeout) }
    /// `Responses.CommonPrompt`, with `\n` in INI, environment and command-line values turned into new lines
    /// (the control layer stores real new lines in JSON and is taken as is).
    public var commonPrompt: String {
        let entry = entry(for: .responsesCommonPrompt)
        if case .controlLayer = entry.origin { return entry.value }
        return entry.value.replacingOccurrences(of: "\\n", with: "\n")
    }
    /// `Responses.MaxOutputBytes`.
    public var maxOutputBytes: Int { integer(.responsesMaxOutputBytes) }
    /// `Admin.Socket`, or ``ConfigPaths/defaultAdminSocket`` when empty.
    public var adminSocket: String { string(.adminSocket).isEmpty ? paths.defaultAdminSocket : string(.adminSocket) }
    /// `Admin.OperatorGroups`.
    public var operatorGroups: [String] { list(.adminOperatorGroups) }
    /// `Admin.SocketGroup` (empty: the daemon's own group).
    public var adminSocketGroup: String { string(.adminSocketGroup) }
    /// `Cloud.Preference`.
    public var cloudPreference: Bool { bool(.cloudPreference) }
    /// `[Backend.<id>]` settings: backend id → key → value.
    public var backendSettings: [String: [String: String]] {
        var result: [String: [String: String]] = [:]
        let prefix = ConfigSchema.backendSectionPrefix
        for name in order where name.hasPrefix(prefix) {
            guard let entry = entries[name] else { continue }
            if let split = backendNames[name] {
                result[split.backend, default: [:]][split.key] = entry.value
                continue
            }
            // A name from elsewhere: backend ids may contain dots, so split at the last one.
            let rest = name.dropFirst(prefix.count)
            guard let dot = rest.lastIndex(of: ".") else { continue }
            result[String(rest[..<dot]), default: [:]][String(rest[rest.index(after: dot)...])] = entry.value
        }
        return result
    }

    // MARK: - JSON (GetConfig)

    /// `{"values":[{"key","value","origin","layer","shadows":[{"value","origin"}]}], "files":[…]}` for `GetConfig`.
    ///
    /// - Parameters:
    ///   - keys: only these names (all when empty); unknown names are left out.
    ///   - withOrigin: include `origin`, `layer` and `shadows`.
    public func json(keys: [String] = [], withOrigin: Bool = true) -> JSONValue {
        let selected = keys.isEmpty ? values() : keys.compactMap { entries[$0] }
        let items = selected.map { entry -> JSONValue in
            var object: JSONObject = ["key": .string(entry.name), "value": .string(entry.value)]
            if withOrigin {
                object["origin"] = .string(entry.origin.description)
                object["layer"] = .string(entry.origin.layer)
                object["shadows"] = .array(
                    entry.shadows.map { ["value": .string($0.value), "origin": .string($0.origin.description)] })
            }
            return .object(object)
        }
        return ["values": .array(items), "files": .array(filesRead.map(JSONValue.string))]
    }
}
