// SPDX-License-Identifier: Apache-2.0
import AFMConfig
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// The `/tmp/afm-UID` fallback of the user layout, and the check that makes it safe (``PrivateDirectory``).
@Suite struct RuntimeDirectoryTests {
    @Test func onlyTheTmpFallbackIsShared() {
        let fallback = ConfigPaths.user(environment: ["HOME": "/home/u"], uid: 1234)
        #expect(fallback.runtimeDirectory == "/tmp/afm-1234")
        #expect(fallback.runtimeDirectoryIsShared)
        let xdg = ConfigPaths.user(environment: ["HOME": "/home/u", "XDG_RUNTIME_DIR": "/run/user/1234"], uid: 1234)
        #expect(xdg.runtimeDirectory == "/run/user/1234/afm")
        #expect(!xdg.runtimeDirectoryIsShared)
        #expect(!ConfigPaths.system().runtimeDirectoryIsShared)
        #expect(!ConfigPaths.relocated(under: "/srv/afm").runtimeDirectoryIsShared)
        // Not shared: nothing to check, nothing created.
        #expect(throws: Never.self) { try ConfigPaths.relocated(under: "/nonexistent/afm").prepareRuntimeDirectory() }
        #expect(!FileManager.default.fileExists(atPath: "/nonexistent/afm/run/afm"))
    }

    @Test func aMissingDirectoryIsCreatedPrivate() throws {
        let parent = TestPaths.makeTemporaryDirectory("afm-private")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let path = parent + "/afm-runtime"
        try PrivateDirectory.prepare(path, owner: getuid())
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        #expect((attributes[.ownerAccountID] as? NSNumber)?.uint32Value == getuid())
        // Again: it exists, it is ours, it passes.
        try PrivateDirectory.prepare(path, owner: getuid())
    }

    @Test(arguments: [(0o700, UInt32(65534)), (0o755, getuid()), (0o770, getuid()), (0o1777, getuid())])
    func aDirectoryNotOursAloneIsRefused(mode: Int, owner: UInt32) throws {
        let parent = TestPaths.makeTemporaryDirectory("afm-private")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let path = parent + "/afm-runtime"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        try #require(chmod(path, mode_t(mode)) == 0)
        if owner != getuid() { try #require(chown(path, owner, owner) == 0, "changing the owner needs root") }
        let error = try #require(throws: PrivateDirectoryError.self) { try PrivateDirectory.prepare(path, owner: getuid()) }
        let octal = String(mode, radix: 8)
        #expect(error.problem == .untrusted(kind: "a directory", owner: owner, mode: UInt32(mode), expectedOwner: getuid()))
        #expect(error.description.hasPrefix("\(path) is not a private directory: it is a directory with owner uid \(owner) and mode "
            + String(repeating: "0", count: 4 - octal.count) + octal), "\(error)")
    }

    @Test func aSymlinkOrAFileIsRefused() throws {
        let parent = TestPaths.makeTemporaryDirectory("afm-private")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        let target = parent + "/target"
        try PrivateDirectory.prepare(target, owner: getuid())
        try FileManager.default.createSymbolicLink(atPath: parent + "/link", withDestinationPath: target)
        let link = try #require(throws: PrivateDirectoryError.self) { try PrivateDirectory.prepare(parent + "/link", owner: getuid()) }
        #expect(link.description.contains("it is a symbolic link"), "\(link)")
        _ = FileManager.default.createFile(atPath: parent + "/file", contents: Data())
        let file = try #require(throws: PrivateDirectoryError.self) { try PrivateDirectory.prepare(parent + "/file", owner: getuid()) }
        #expect(file.description.contains("it is not a directory"), "\(file)")
    }
}
