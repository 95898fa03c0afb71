// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// Builds the effective configuration from every layer, lowest first, recording each value's origin.
///
/// ```
/// 0 defaults (ConfigSchema) ─► 1 main file (first candidate found, or --config FILE)
///   ─► 2 drop-ins afmd.conf.d/*.conf, merged by file name across dirs, applied in name order
///   ─► 3 control layer <state>/control.json (ServerSettings) ─► 4 AFM_* environment ─► 5 command line
/// ```
/// A drop-in name in a higher-priority directory (`/etc/afm/afmd.conf.d/60-x.conf`) hides the same name in
/// a lower one (`/usr/lib/afm/afmd.conf.d/60-x.conf`); a drop-in that is a symlink to `/dev/null` masks it.
/// Every value is validated in the layer that sets it, so an error names the exact file and line.
public struct ConfigurationLoader: Sendable {
    /// A value from the command line: which flag set which key.
    public struct CommandLineValue: Sendable, Hashable {
        /// The flag as typed (`--listen`, `--server.listen`).
        public var flag: String
        /// The schema key it sets.
        public var key: ConfigKey
        /// The value.
        public var value: String

        /// Resolves `flag` (see ``ConfigSchema/key(forFlag:)``).
        ///
        /// - Throws: ``ConfigError`` when the flag sets no key.
        public init(flag: String, value: String) throws(ConfigError) {
            guard let key = ConfigSchema.key(forFlag: flag) else {
                throw ConfigError(file: "command line \(flag)", message: "unknown option")
            }
            self.flag = flag
            self.key = key
            self.value = value
        }
    }

    /// Where to look.
    public var paths: ConfigPaths
    /// The process environment (only `AFM_<SECTION>_<KEY>` variables of schema keys are used).
    public var environment: [String: String]
    /// Command-line values, in order (a later one wins).
    public var commandLine: [CommandLineValue]
    /// Whether to read the control layer (layer 3). Tests switch it off to look at the file layers alone.
    public var readsControlLayer = true

    /// Creates a loader.
    public init(paths: ConfigPaths, environment: [String: String] = [:], commandLine: [CommandLineValue] = []) {
        self.paths = paths
        self.environment = environment
        self.commandLine = commandLine
    }

    /// Reads every layer and returns the merged result.
    ///
    /// - Throws: ``ConfigError`` for the first problem: an unreadable file, a syntax error, an unknown section
    ///   or key, or an invalid value, located as `file:line` (or the variable, flag or control file).
    public func load() throws(ConfigError) -> LoadedConfiguration {
        var builder = Builder()

        // 1. Main file.
        var mainFile: String?
        if let explicit = paths.explicitMainFile {
            guard FileManager.default.fileExists(atPath: explicit) else {
                throw ConfigError(file: explicit, message: "the configuration file given with --config does not exist")
            }
            mainFile = explicit
        } else {
            mainFile = paths.mainFileCandidates.first { FileManager.default.fileExists(atPath: $0) }
        }
        if let mainFile {
            try builder.apply(file: mainFile) { .mainFile(path: mainFile, line: $0) }
        }

        // 2. Drop-ins, merged by file name.
        let dropIns = Self.dropIns(in: paths.dropInDirectories)
        for file in dropIns {
            try builder.apply(file: file) { .dropIn(path: file, line: $0) }
        }

        // 3. Control layer.
        var controlFile: String?
        if readsControlLayer {
            let path = paths.controlFile
            let settings: ServerSettings?
            do {
                settings = try SettingsStore.read(path: path)
            } catch {
                throw ConfigError(file: "control layer \(path)", message: error.description)
            }
            if let settings {
                controlFile = path
                builder.apply(settings: settings, origin: .controlLayer(path: path))
            }
        }

        // 4. Environment.
        for key in ConfigSchema.keys {
            guard let value = environment[key.environmentVariable] else { continue }
            let origin = ConfigOrigin.environment(variable: key.environmentVariable)
            if let problem = key.type.validate(value) {
                throw ConfigError(file: origin.description, message: "\(key.name) \(problem)")
            }
            builder.set(key.name, value, origin)
        }
        let known = Set(ConfigSchema.keys.map(\.environmentVariable))
        let sectionPrefixes = ConfigSchema.sections.map { "AFM_" + ConfigKey.snake($0) + "_" }
        for name in environment.keys.sorted() where !known.contains(name) && sectionPrefixes.contains(where: name.hasPrefix) {
            builder.warnings.append("environment \(name): no such configuration key; ignored")
        }

        // 5. Command line.
        for item in commandLine {
            let origin = ConfigOrigin.commandLine(flag: item.flag)
            if let problem = item.key.type.validate(item.value) {
                throw ConfigError(file: origin.description, message: "\(item.key.name) \(problem)")
            }
            builder.set(item.key.name, item.value, origin)
        }

        return LoadedConfiguration(
            paths: paths, mainFile: mainFile, dropIns: dropIns, controlFile: controlFile, entries: builder.entries,
            order: builder.order, backendNames: builder.backendNames, warnings: builder.warnings)
    }

    /// The drop-in files to read, in application order: names from all directories, each name taken from the
    /// first directory that has it, sorted by name; masked (`/dev/null`) or empty names are skipped.
    public static func dropIns(in directories: [String]) -> [String] {
        var chosen: [String: String] = [:]
        for directory in directories {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for name in names where name.hasSuffix(".conf") && !name.hasPrefix(".") && chosen[name] == nil {
                chosen[name] = directory + "/" + name
            }
        }
        return chosen.keys.sorted().compactMap { name in
            // The force unwrap is safe: `name` comes from `chosen.keys`.
            let path = chosen[name]!
            let resolved = (path as NSString).resolvingSymlinksInPath
            if resolved == "/dev/null" { return nil }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else {
                return nil
            }
            return path
        }
    }

    // MARK: - Merging

    private struct Builder {
        var entries: [String: ConfigEntry] = [:]
        var order: [String] = []
        /// `Backend.<id>.<Key>` → (id, key), as the section header and the assignment spelled them: both may
        /// contain dots (`[Backend.private-cloud]` `Upstream.2.Model`), so the name alone cannot be split.
        var backendNames: [String: (backend: String, key: String)] = [:]
        var warnings: [String] = []

        init() {
            for key in ConfigSchema.keys {
                entries[key.name] = ConfigEntry(name: key.name, value: key.defaultValue, origin: .defaultValue, shadows: [])
                order.append(key.name)
            }
        }

        mutating func set(_ name: String, _ value: String, _ origin: ConfigOrigin) {
            if var entry = entries[name] {
                entry.shadows.insert(ConfigEntry.Shadowed(value: entry.value, origin: entry.origin), at: 0)
                entry.value = value
                entry.origin = origin
                entries[name] = entry
            } else {
                entries[name] = ConfigEntry(name: name, value: value, origin: origin, shadows: [])
                order.append(name)
            }
        }

        mutating func apply(file: String, origin: (Int) -> ConfigOrigin) throws(ConfigError) {
            let bytes: [UInt8]
            do {
                bytes = try FileContents.read(path: file)
            } catch {
                throw ConfigError(file: file, message: "cannot read: \(error)")
            }
            let document = try INIDocument(bytes: bytes, file: file)
            for header in document.sections {
                if ConfigSchema.sections.contains(header.name) { continue }
                if header.name.hasPrefix(ConfigSchema.backendSectionPrefix) {
                    let id = String(header.name.dropFirst(ConfigSchema.backendSectionPrefix.count))
                    if ConfigSchema.isValidBackendID(id) { continue }
                    throw ConfigError(
                        file: file, line: header.line,
                        message: "[\(header.name)]: a backend id uses letters, digits, '-', '_' and '.'")
                }
                let known = (ConfigSchema.sections.map { "[\($0)]" } + ["[Backend.<id>]"]).joined(separator: ", ")
                throw ConfigError(
                    file: file, line: header.line, message: "unknown section [\(header.name)]; known sections: \(known)")
            }
            for assignment in document.assignments {
                if assignment.section.hasPrefix(ConfigSchema.backendSectionPrefix) {
                    let name = "\(assignment.section).\(assignment.key)"
                    set(name, assignment.value, origin(assignment.line))
                    let id = String(assignment.section.dropFirst(ConfigSchema.backendSectionPrefix.count))
                    backendNames[name] = (id, assignment.key)
                    continue
                }
                guard let key = ConfigSchema.key(named: "\(assignment.section).\(assignment.key)") else {
                    let known = ConfigSchema.keys.filter { $0.section == assignment.section }.map(\.key)
                    throw ConfigError(
                        file: file, line: assignment.line,
                        message: "unknown key '\(assignment.key)' in [\(assignment.section)]; known keys: "
                            + known.joined(separator: ", "))
                }
                if let problem = key.type.validate(assignment.value) {
                    throw ConfigError(file: file, line: assignment.line, message: "\(key.key) \(problem)")
                }
                set(key.name, assignment.value, origin(assignment.line))
            }
        }

        mutating func apply(settings: ServerSettings, origin: ConfigOrigin) {
            if settings.host != nil || settings.port != nil {
                // A saved host or port replaces a Unix socket below with TCP; missing parts come from the default
                // (the force unwrap is safe: the schema's default is a valid HOST:PORT).
                let lower = entries[ConfigKey.serverListen.name].flatMap { HostPort($0.value) }
                    ?? HostPort(ConfigKey.serverListen.defaultValue)!
                let address = HostPort(host: settings.host ?? lower.host, port: settings.port ?? lower.port)
                set(ConfigKey.serverListen.name, address.description, origin)
            }
            if let preference = settings.privateCloudPreference {
                set(ConfigKey.cloudPreference.name, preference ? "yes" : "no", origin)
            }
            if let prompt = settings.commonPrompt {
                set(ConfigKey.responsesCommonPrompt.name, prompt, origin)
            }
        }
    }
}
