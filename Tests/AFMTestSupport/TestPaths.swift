// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation
import Synchronization

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

    /// A fresh, unique temporary directory, removed when the test process exits (an owner such as a harness's
    /// ``TemporaryDirectory`` removes it sooner).
    public static func makeTemporaryDirectory(_ label: String = "afm-test") -> String {
        let path = NSTemporaryDirectory() + "\(label)-\(getpid())-\(UUID().uuidString.prefix(8))"
        try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)  // A test cannot go on without it.
        _ = removalAtExit
        made.withLock { _ = $0.insert(path) }
        return path
    }

    /// Removes a directory ``makeTemporaryDirectory(_:)`` made, with everything in it (now, not at exit).
    public static func removeTemporaryDirectory(_ path: String) {
        guard !keepsDirectoriesForLeakReports else { return }
        try? FileManager.default.removeItem(atPath: path)
        made.withLock { _ = $0.remove(path) }
    }

    /// Under AddressSanitizer the directories stay: LeakSanitizer symbolizes its report at the process's exit from
    /// the plugin files in them, and its suppressions (`leak:fixture_create`, Tests/sanitizers/address.supp) match
    /// only symbolized frames; with the files removed, instances kept by design were reported as leaks.
    /// `scripts/test-sanitized address` gives the run a TMPDIR of its own and removes it once the tests exited.
    public static let keepsDirectoriesForLeakReports = Sanitizer.current == .address

    /// The directories made and not yet removed: what the exit handler removes.
    private static let made = Mutex<Set<String>>([])

    /// Installs the exit handler once. It runs when the test process exits normally (XCTest and Swift Testing end
    /// with `exit`); a process that crashes leaves its directories, named with its pid.
    private static let removalAtExit: Void = {
        atexit {
            guard !TestPaths.keepsDirectoriesForLeakReports else { return }
            for path in TestPaths.made.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
        }
    }()

    /// Directories shared by successive owners (a daemon's config root that a restarted daemon reuses), with the
    /// number of owners each has; the last owner to go removes it.
    private static let shared = Mutex<[String: Int]>([:])

    /// Adds an owner to a directory made by ``makeOwnedTemporaryDirectory(_:)``; false (and nothing owned) for any
    /// other directory, which its maker keeps.
    static func retainOwnedDirectory(_ path: String) -> Bool {
        shared.withLock { owners in
            guard let count = owners[path] else { return false }
            owners[path] = count + 1
            return true
        }
    }

    /// A fresh directory with one owner (``releaseOwnedDirectory(_:)`` removes it when its last owner lets go).
    static func makeOwnedTemporaryDirectory(_ label: String) -> String {
        let path = makeTemporaryDirectory(label)
        shared.withLock { $0[path] = 1 }
        return path
    }

    /// One owner lets go of `path`; the last one removes it.
    static func releaseOwnedDirectory(_ path: String) {
        let last = shared.withLock { owners -> Bool in
            guard let count = owners[path] else { return false }
            if count > 1 {
                owners[path] = count - 1
                return false
            }
            owners[path] = nil
            return true
        }
        if last { removeTemporaryDirectory(path) }
    }
}

/// Reads a /proc file completely. (/proc files report size 0, and a size-based read can stop early.)
public func readProcFile(_ path: String) -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else { return "" }
    defer { try? handle.close() }
    return String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
}
