// SPDX-License-Identifier: Apache-2.0
import AFMLogging

/// `afmd --check-config`: loads every layer, validates it, and describes the result for a human.
public struct ConfigCheck: Sendable {
    /// The outcome.
    public var configuration: LoadedConfiguration?
    /// The first error, when loading failed.
    public var error: ConfigError?
    /// The text to print: the files read, the values that differ from their defaults with their origins, the
    /// warnings, and `configuration OK` or `Error: file:line: message`; one line per item, control characters
    /// escaped (``TerminalSafeText``).
    public var report: String
    /// 0 when valid, 78 (`EX_CONFIG`) when not.
    public var exitStatus: Int32 { error == nil ? 0 : 78 }

    /// Runs `loader` and builds the report.
    public init(loader: ConfigurationLoader) {
        var lines: [String] = []
        let paths = loader.paths
        switch paths.mode {
        case .system: lines.append("mode: system")
        case .user: lines.append("mode: user")
        case .relocated(let root): lines.append("mode: relocated under \(root)")
        }
        do {
            let configuration = try loader.load()
            self.configuration = configuration
            self.error = nil
            if configuration.filesRead.isEmpty { lines.append("files: none (compiled-in defaults only)") }
            for file in configuration.filesRead { lines.append("read: \(file)") }
            for entry in configuration.values() where entry.origin != .defaultValue {
                lines.append("\(entry.name)=\(entry.value)    # \(entry.origin)")
            }
            for warning in configuration.warnings { lines.append("warning: \(warning)") }
            lines.append("configuration OK")
        } catch {
            self.configuration = nil
            self.error = error
            lines.append("Error: \(error)")
        }
        // Values, paths and error messages come from files anyone with write access to them chose (a hand-edited
        // control.json): each line is neutralized, so no value drives the terminal or forges a line of its own.
        report = lines.map { TerminalSafeText.neutralized($0) }.joined(separator: "\n")
    }
}
