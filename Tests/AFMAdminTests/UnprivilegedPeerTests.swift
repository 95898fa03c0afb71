// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// A real client process running as `nobody` (uid 65534) via `setpriv`: allowed user methods, refused
/// operator and admin ones. Needs root (to switch uid); skipped otherwise.
@Suite(.serialized) struct UnprivilegedPeerTests {
    static let canSwitchUser = UserDatabase.effectiveUserID == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")

    /// Runs `afmctl --socket PATH ARGS` as uid/gid 65534 with `groups` as supplementary groups.
    static func afmctlAsNobody(_ socket: String, _ arguments: [String], groups: [UInt32] = []) async throws -> (status: Int32, output: String) {
        try await offPool { try afmctlAsNobodyBlocking(socket, arguments, groups: groups) }
    }

    static func afmctlAsNobodyBlocking(_ socket: String, _ arguments: [String], groups: [UInt32]) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        let groupArguments = groups.isEmpty ? ["--clear-groups"] : ["--groups=" + groups.map(String.init).joined(separator: ",")]
        process.arguments = ["--reuid=65534", "--regid=65534"] + groupArguments
            + [TestPaths.binDirectory + "/afmctl", "--socket", socket] + arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }

    @Test(.enabled(if: canSwitchUser)) func nobodyIsAUser() async throws {
        // Mode 0666 so nobody may connect at all; the level check is what is under test.
        let server = try TestAdminServer(policy: AdminAccessPolicy(operatorGroups: []), mode: 0o666)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        let status = try await Self.afmctlAsNobody(server.path, ["--json", "status"])
        #expect(status.status == 0, "\(status.output)")
        #expect(status.output.contains("\"uid\":65534"))
        #expect(try await Self.afmctlAsNobody(server.path, ["backends"]).status == 0)
        #expect(try await Self.afmctlAsNobody(server.path, ["config", "show"]).status == 0)
        #expect(try await Self.afmctlAsNobody(server.path, ["prompt", "get"]).output == "Be brief.\n")
        for arguments in [["reload"], ["listener", "stop"], ["prompt", "set", "x"], ["settings", "set", "port", "1"]] {
            let result = try await Self.afmctlAsNobody(server.path, arguments)
            #expect(result.status == 77, "\(arguments): \(result.output)")
            #expect(result.output.contains("needs the"), "\(result.output)")
        }
        #expect(!server.daemon.calls.withLock { $0 }.contains { ["Reload", "SetListener", "SetPrompt", "SetSetting"].contains($0) })
    }

    @Test(.enabled(if: canSwitchUser)) func nobodyInAnOperatorGroupMayReloadButNotSetSettings() async throws {
        let group: UInt32 = 4242  // any gid works: SO_PEERGROUPS reports the supplementary groups setpriv set
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [0], operatorGroupIDs: [group]), mode: 0o666)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        let reload = try await Self.afmctlAsNobody(server.path, ["reload", "scripted"], groups: [group])
        #expect(reload.status == 0, "\(reload.output)")
        #expect(reload.output.contains("generation=2"))
        #expect(try await Self.afmctlAsNobody(server.path, ["settings", "set", "port", "1"], groups: [group]).status == 77)
    }

    @Test(.enabled(if: canSwitchUser)) func socketModeKeepsOthersOut() async throws {
        let server = try TestAdminServer(policy: AdminAccessPolicy(operatorGroups: []), mode: 0o660)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        let result = try await Self.afmctlAsNobody(server.path, ["status"])
        #expect(result.status == 77, "\(result.output)")
        #expect(result.output.contains(server.path))
    }
}
