// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import Glibc

/// The INI parser and the configuration loader (schema types, ranges, unknown keys, backend sections).
///
/// Properties: a document is parsed alike however its lines end (LF or CRLF); the loader either loads a file or
/// names the line that is wrong; what it loads, written back as an INI file, loads to the same values.
enum ConfigFuzz {
    static func run(_ bytes: [UInt8]) throws {
        let document: INIDocument
        do {
            document = try INIDocument(bytes: bytes, file: "fuzz.conf")
        } catch {
            try check(error.line >= 1, "an INI error without a line: \(error)")
            return
        }
        // CRLF line ends read the same as LF.
        if !bytes.contains(0x0D) {
            let crlf = bytes.flatMap { $0 == 0x0A ? [0x0D, 0x0A] : [$0] }
            let again = try? INIDocument(bytes: crlf, file: "fuzz.conf")
            try check(again == document, "CRLF line ends parsed differently")
        }
        let loaded: LoadedConfiguration
        do {
            loaded = try load(bytes)
        } catch {
            return
        }
        // The effective values from the file, written out again, load to the same values.
        var rewritten = ""
        var bySection: [String: [String]] = [:]
        var order: [String] = []
        for assignment in document.assignments {
            if bySection[assignment.section] == nil { order.append(assignment.section) }
            bySection[assignment.section, default: []].append("\(assignment.key)=\(assignment.value)")
        }
        for section in order { rewritten += "[\(section)]\n" + bySection[section]!.joined(separator: "\n") + "\n" }
        let reloaded: LoadedConfiguration
        do {
            reloaded = try load(Array(rewritten.utf8))
        } catch {
            throw PropertyViolation(description: "a configuration written back does not load: \(error)\n\(rewritten)")
        }
        // Compared sorted: the rewrite groups a section named twice into one, so backend keys are listed in another
        // order (a fuzz input with [Backend.local] before and after [Backend.lzcal]); their values must not change.
        let before = loaded.values().map { "\($0.name)=\($0.value)" }.sorted()
        let after = reloaded.values().map { "\($0.name)=\($0.value)" }.sorted()
        try check(before == after, "a configuration written back loads differently:\n\(before)\n\(after)")
        try check(loaded.backendSettings == reloaded.backendSettings, "backend sections load differently")
    }

    /// Loads `bytes` as the main configuration file (defaults below it, nothing above).
    static func load(_ bytes: [UInt8]) throws(ConfigError) -> LoadedConfiguration {
        let path = scratchFile
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            close(descriptor)
        }
        let paths = ConfigPaths(
            mode: .user, mainFileCandidates: [], dropInDirectories: [], stateDirectory: "/nonexistent",
            runtimeDirectory: "/nonexistent", explicitMainFile: path)
        return try ConfigurationLoader(paths: paths).load()
    }

    private static let scratchFile = "/tmp/afm-fuzz-config-\(getpid()).conf"
}
