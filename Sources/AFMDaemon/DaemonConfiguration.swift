// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The daemon's configuration: defaults overridden by the INI config file, then by the command line.
///
/// ```ini
/// [Server]
/// Listen=127.0.0.1:11535
/// ShutdownTimeoutSeconds=30
///
/// [Backends]
/// Directory=/usr/lib/afm/backends
/// Disabled=vendor-x
/// SilenceTimeoutSeconds=300
/// DrainTimeoutSeconds=120
///
/// [Backend.scripted]
/// Script=/etc/afm/demo-script.json
/// ```
/// Keys of `[Backend.<id>]` sections are passed to that backend verbatim. Unknown sections and keys are errors
/// with `file:line`.
public struct DaemonConfiguration: Sendable {
    public var listen = ListenAddress(host: "127.0.0.1", port: 11535)
    public var shutdownTimeout: Duration = .seconds(30)
    public var backendDirectory: String?
    public var disabledBackends: Set<String> = []
    public var silenceTimeout: Duration = .seconds(300)
    public var cancelGrace: Duration = .seconds(5)
    public var drainTimeout: Duration = .seconds(120)
    public var requestHeaderTimeout: Duration = .seconds(30)
    public var processingDeadline: Duration = .seconds(300)
    public var backendSettings: [String: [String: String]] = [:]
    /// Text prepended to the instructions of every request.
    public var commonPrompt = ""
    public var stateDirectory: String = ""
    public var runtimeDirectory: String = ""

    /// A config problem, reported as `file:line: message`.
    public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
        public var file: String
        public var line: Int
        public var message: String
        public var description: String { line > 0 ? "\(file):\(line): \(message)" : "\(file): \(message)" }
    }

    public init() {}

    /// Builds the configuration from defaults, the config file (if any) and the command line.
    public init(options: DaemonOptions, environment: [String: String]) throws(ConfigError) {
        let root = options.configRoot.map { ($0 as NSString).standardizingPath }
        if let root {
            stateDirectory = (root as NSString).appendingPathComponent("state")
            runtimeDirectory = (root as NSString).appendingPathComponent("run")
        } else {
            let home = environment["HOME"] ?? NSHomeDirectory()
            stateDirectory = environment["XDG_STATE_HOME"].map { ($0 as NSString).appendingPathComponent("afm") }
                ?? (home as NSString).appendingPathComponent(".local/state/afm")
            runtimeDirectory = environment["XDG_RUNTIME_DIR"].map { ($0 as NSString).appendingPathComponent("afm") }
                ?? "/tmp/afm-\(getuid())"
        }
        var file = options.configFile
        if file == nil, let root {
            let candidate = (root as NSString).appendingPathComponent("afmd.conf")
            if FileManager.default.fileExists(atPath: candidate) { file = candidate }
        }
        if let file { try apply(file: file) }
        if let listen = options.listen {
            guard let address = ListenAddress(listen) else {
                throw ConfigError(file: "--listen", line: 0, message: "'\(listen)' is not HOST:PORT with a port in 0…65535")
            }
            self.listen = address
        }
        if let directory = options.backendDirectory { backendDirectory = directory }
    }

    mutating func apply(file: String) throws(ConfigError) {
        let text: String
        do {
            text = try String(contentsOfFile: file, encoding: .utf8)
        } catch {
            throw ConfigError(file: file, line: 0, message: "cannot read: \(error.localizedDescription)")
        }
        var section = ""
        for (offset, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let lineNumber = offset + 1
            let line = rawLine.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            func fail(_ message: String) -> ConfigError { ConfigError(file: file, line: lineNumber, message: message) }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]") else { throw fail("section header must end with ']'") }
                section = String(line.dropFirst().dropLast())
                guard ["Server", "Backends", "Responses"].contains(section) || section.hasPrefix("Backend.") && section.count > 8 else {
                    throw fail("unknown section [\(section)]; expected [Server], [Backends], [Responses] or [Backend.<id>]")
                }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { throw fail("expected Key=Value") }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !key.isEmpty else { throw fail("empty key") }
            func seconds() throws(ConfigError) -> Duration {
                guard let number = Int(value), number > 0, number <= 86_400 else {
                    throw fail("\(key) must be a whole number of seconds between 1 and 86400, not '\(value)'")
                }
                return .seconds(number)
            }
            switch (section, key) {
            case ("Server", "Listen"):
                guard let address = ListenAddress(value) else { throw fail("Listen must be HOST:PORT, not '\(value)'") }
                listen = address
            case ("Server", "ShutdownTimeoutSeconds"): shutdownTimeout = try seconds()
            case ("Server", "RequestHeaderTimeoutSeconds"): requestHeaderTimeout = try seconds()
            case ("Server", "ProcessingDeadlineSeconds"): processingDeadline = try seconds()
            case ("Backends", "Directory"): backendDirectory = value
            case ("Responses", "CommonPrompt"): commonPrompt = value.replacingOccurrences(of: "\\n", with: "\n")
            case ("Backends", "Disabled"):
                disabledBackends = Set(value.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init))
            case ("Backends", "SilenceTimeoutSeconds"): silenceTimeout = try seconds()
            case ("Backends", "CancelGraceSeconds"): cancelGrace = try seconds()
            case ("Backends", "DrainTimeoutSeconds"): drainTimeout = try seconds()
            case (let name, _) where name.hasPrefix("Backend."):
                backendSettings[String(name.dropFirst("Backend.".count)), default: [:]][key] = value
            case ("", _):
                throw fail("'\(key)' appears before any [Section]")
            default:
                throw fail("unknown key '\(key)' in [\(section)]")
            }
        }
    }
}
