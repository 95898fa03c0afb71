// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Where the build products and fixtures of this checkout are, for tests.
///
/// `make test` exports `AFM_BIN_DIR` (the SwiftPM bin directory); without it the paths are derived from this
/// file's location, so `swift test` from the package root works too.
public enum TestPaths {
    /// The package root.
    public static let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0..<3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// The SwiftPM bin directory with `afmd` and the plugin libraries.
    public static var binDirectory: String {
        if let value = ProcessInfo.processInfo.environment["AFM_BIN_DIR"], !value.isEmpty { return value }
        return root + "/.build/debug"
    }

    public static var afmd: String { binDirectory + "/afmd" }
    public static var runner: String { binDirectory + "/afm-backend-runner" }
    public static var scriptedLibrary: String { binDirectory + "/libafm-backend-scripted.so" }
    public static var scriptedManifest: String { root + "/Plugins/scripted/scripted.json" }
    public static var abiInclude: String { root + "/Sources/CAFMBackendABI/include" }
    public static var fixtureSource: String { root + "/Tests/Fixtures/backends/fixture_backend.c" }

    /// A fresh, unique temporary directory.
    public static func makeTemporaryDirectory(_ label: String = "afm-test") -> String {
        let path = NSTemporaryDirectory() + "\(label)-\(getpid())-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)  // A test cannot go on without it.
        return path
    }
}

/// Reads a /proc file completely. (/proc files report size 0, and a size-based read can stop early.)
public func readProcFile(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
}
