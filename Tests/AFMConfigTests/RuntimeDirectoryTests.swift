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

    /// XDG_RUNTIME_DIR=/tmp (or any world-writable directory) gives `/tmp/afm`, which another user can create first:
    /// it is checked like the `/tmp/afm-UID` fallback.
    @Test func aRuntimeDirectoryInAWorldWritableDirectoryIsChecked() throws {
        let parent = TestPaths.makeTemporaryDirectory("afm-sticky")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        try #require(chmod(parent, 0o1777) == 0)
        try FileManager.default.createDirectory(atPath: parent + "/afm", withIntermediateDirectories: false)
        try #require(chown(parent + "/afm", 65534, 65534) == 0, "changing the owner needs root")
        let paths = ConfigPaths.user(environment: ["HOME": "/home/u", "XDG_RUNTIME_DIR": parent], uid: getuid())
        #expect(paths.runtimeDirectory == parent + "/afm")
        let error = try #require(throws: PrivateDirectoryError.self) { try paths.prepareRuntimeDirectory() }
        #expect(error.description.hasPrefix("\(parent)/afm is not a private directory"), "\(error)")
        // A parent only its owner writes to (like /run/user/UID) needs no check.
        try #require(chmod(parent, 0o755) == 0)
        #expect(throws: Never.self) { try paths.prepareRuntimeDirectory() }
    }

    /// Without HOME the home comes from the user database, not from `/tmp/afm-home-UID` (which anyone may create).
    @Test func withoutHomeTheUserDatabaseNamesTheHome() throws {
        let entry = try #require(getpwuid(getuid()))
        let home = String(cString: entry.pointee.pw_dir)
        let paths = ConfigPaths.user(environment: [:], uid: getuid())
        #expect(paths.mainFileCandidates == [home + "/.config/afm/afmd.conf"])
        #expect(paths.stateDirectory == home + "/.local/state/afm")
        #expect(throws: Never.self) { try paths.prepareHomeDirectory() }
    }

    /// A uid the user database does not know gets `/tmp/afm-home-UID` only through the private-directory check.
    @Test func withoutHomeOrEntryTheFallbackHomeMustBePrivate() throws {
        var uid = UInt32.random(in: 60_000..<65_000)
        while getpwuid(uid) != nil { uid += 1 }
        let home = "/tmp/afm-home-\(uid)"
        try? FileManager.default.removeItem(atPath: home)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let paths = ConfigPaths.user(environment: [:], uid: uid)
        #expect(paths.mainFileCandidates == [home + "/.config/afm/afmd.conf"])
        #expect(paths.sharedHomeDirectory == home)
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
        try #require(chmod(home, 0o700) == 0)
        // Ours (this process), not the uid's: refused, and the message says what to do.
        let error = try #require(throws: PrivateDirectoryError.self) { try paths.prepareHomeDirectory(owner: uid) }
        #expect(error.description.contains("\(home) is not a private directory"), "\(error)")
        #expect(error.description.contains("set HOME"), "\(error)")
        // XDG_CONFIG_HOME and XDG_STATE_HOME both set: the home is not used at all.
        let xdg = ConfigPaths.user(environment: ["XDG_CONFIG_HOME": "/c", "XDG_STATE_HOME": "/s"], uid: uid)
        #expect(xdg.sharedHomeDirectory == nil)
        #expect(xdg.mainFileCandidates == ["/c/afm/afmd.conf"])
    }
}
