// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMTestSupport
import Foundation

/// A throw-away `--config-root` tree: write files into its layers, then load it.
struct ConfigTree {
    let root = TestPaths.makeTemporaryDirectory("afm-config")
    var paths: ConfigPaths { .relocated(under: root) }

    /// Writes `text` at `relative` (creating directories) and returns the absolute path.
    @discardableResult
    func write(_ relative: String, _ text: String) -> String {
        let path = root + "/" + relative
        try! FileManager.default.createDirectory(  // A test cannot go on without its tree.
            atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
        try! text.write(toFile: path, atomically: false, encoding: .utf8)  // Same.
        return path
    }

    func load(
        environment: [String: String] = [:], commandLine: [(String, String)] = [], configFile: String? = nil
    ) throws(ConfigError) -> LoadedConfiguration {
        var paths = self.paths
        paths.explicitMainFile = configFile
        var values: [ConfigurationLoader.CommandLineValue] = []
        for (flag, value) in commandLine { values.append(try .init(flag: flag, value: value)) }
        return try ConfigurationLoader(paths: paths, environment: environment, commandLine: values).load()
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }
}
