// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMTestSupport
import Foundation
import Testing

@Suite struct ConfigSchemaTests {
    static let shippedFile = TestPaths.root + "/etc/afmd.conf"

    /// `etc/afmd.conf` lists every key, commented out with its default, inside its section.
    /// Regenerate it with `AFM_REGENERATE_CONF=1 swift test --filter ConfigSchemaTests`.
    @Test func shippedFileListsEveryKeyWithItsDefault() throws {
        if ProcessInfo.processInfo.environment["AFM_REGENERATE_CONF"] == "1" {
            try ConfigSchema.renderDefaultFile().write(toFile: Self.shippedFile, atomically: true, encoding: .utf8)
        }
        let text = try String(contentsOfFile: Self.shippedFile, encoding: .utf8)
        var section = ""
        var found: [String: String] = [:]
        for line in text.split(separator: "\n") {
            if line.hasPrefix("[") { section = String(line.dropFirst().dropLast()) }
            if line.hasPrefix("#"), !line.hasPrefix("# "), let equals = line.firstIndex(of: "=") {
                found["\(section).\(line.dropFirst()[..<equals])"] = String(line[line.index(after: equals)...])
            }
        }
        for key in ConfigSchema.keys {
            #expect(found[key.name] == key.defaultValue, "etc/afmd.conf must list #\(key.key)=\(key.defaultValue) in [\(key.section)]")
        }
        #expect(text == ConfigSchema.renderDefaultFile(), "etc/afmd.conf is out of date; regenerate it (see above)")
    }

    /// The shipped file, all comments, loads as pure defaults.
    @Test func shippedFileLoadsAsDefaults() throws {
        let paths = ConfigPaths(
            mode: .user, mainFileCandidates: [], dropInDirectories: [], stateDirectory: "/nonexistent",
            runtimeDirectory: "/nonexistent", explicitMainFile: Self.shippedFile)
        let config = try ConfigurationLoader(paths: paths).load()
        #expect(config.values().allSatisfy { $0.origin == .defaultValue })
    }

    @Test func defaultsAreValidForTheirTypes() {
        for key in ConfigSchema.keys {
            #expect(key.type.validate(key.defaultValue) == nil, "\(key.name)")
            #expect(!key.summary.isEmpty)
        }
        #expect(Set(ConfigSchema.keys.map(\.name)).count == ConfigSchema.keys.count)
    }

    @Test func flags() {
        #expect(ConfigSchema.key(forFlag: "--listen") == .serverListen)
        #expect(ConfigSchema.key(forFlag: "--backend-dir") == .backendsDirectory)
        #expect(ConfigSchema.key(forFlag: "--backends.drainTimeoutSeconds") == .backendsDrainTimeout)
        #expect(ConfigSchema.key(forFlag: "--config") == nil)
    }
}
