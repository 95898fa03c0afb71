// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Builds a backend directory for a test: libraries next to their manifests, as `afmd --backend-dir` expects.
public struct BackendDirectoryBuilder {
    public let path: String

    public init(path: String = TestPaths.makeTemporaryDirectory("afm-backends")) {
        self.path = path
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    /// Installs the scripted backend (the real `.so` from the build).
    ///
    /// - Parameter hosting: the manifest's `hosting` (`in-process`, `runner`), or nil to leave the field out.
    @discardableResult
    public func addScripted(id: String = "scripted", hosting: String? = "in-process") throws -> String {
        let library = path + "/\(id).so"
        try? FileManager.default.removeItem(atPath: library)
        try FileManager.default.copyItem(atPath: TestPaths.scriptedLibrary, toPath: library)
        try writeManifest(id: id, library: "\(id).so", hosting: hosting)
        return library
    }

    /// Compiles the C fixture backend with the given `-D` flags and installs it as `id`.
    ///
    /// - Parameter hosting: the manifest's `hosting` (`in-process`, `runner`), or nil to leave the field out.
    @discardableResult
    public func addCFixture(
        id: String = "c-fixture", defines: [String] = [], manifestABIMajor: Int = 1, hosting: String? = "in-process"
    ) throws -> String {
        let library = path + "/\(id).so"
        try FixtureCompiler.compile(defines: defines, output: library)
        try writeManifest(id: id, library: "\(id).so", hosting: hosting, abiMajor: manifestABIMajor)
        return library
    }

    /// Writes `<id>.json`.
    public func writeManifest(id: String, library: String, hosting: String?, abiMajor: Int = 1, version: String = "1.0.0") throws {
        let hostingField = hosting.map { #","hosting":"\#($0)""# } ?? ""
        let manifest = """
            {"manifest_version":1,"id":"\(id)","library":"\(library)","abi_major":\(abiMajor),"version":"\(version)"\(hostingField)}
            """
        try manifest.write(toFile: path + "/\(id).json", atomically: true, encoding: .utf8)
    }
}

/// Compiles `Tests/Fixtures/backends/fixture_backend.c` with `cc`, as a vendor would build a plain C backend.
public enum FixtureCompiler {
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public static func compile(defines: [String], output: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments =
            ["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-fvisibility=hidden", "-I", TestPaths.abiInclude]
            + defines.map { "-D" + $0 } + [TestPaths.fixtureSource, "-o", output, "-lpthread"]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(description: "cc failed (\(process.terminationStatus)) for \(defines): \(text)")
        }
    }
}
