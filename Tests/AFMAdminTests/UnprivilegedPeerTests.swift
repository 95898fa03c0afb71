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

    /// Runs `afmctl --socket PATH ARGS` as uid 65534 (gid `gid`, default 65534) with `groups` as supplementary groups.
    static func afmctlAsNobody(_ socket: String, _ arguments: [String], gid: UInt32 = 65534, groups: [UInt32] = []) async throws -> (status: Int32, output: String) {
        try await offPool { try afmctlAsNobodyBlocking(socket, arguments, gid: gid, groups: groups) }
    }

    static func afmctlAsNobodyBlocking(_ socket: String, _ arguments: [String], gid: UInt32, groups: [UInt32]) throws -> (status: Int32, output: String) {
        let groupArguments = groups.isEmpty ? ["--clear-groups"] : ["--groups=" + groups.map(String.init).joined(separator: ",")]
        let result = try CommandOutput.run(
            "/usr/bin/setpriv", ["--reuid=65534", "--regid=\(gid)"] + groupArguments + [TestPaths.binDirectory + "/afmctl", "--socket", socket] + arguments)
        return (result.status, result.output)
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

    /// 300 supplementary groups, more than the 256 the server used to read: every one of them is read (the kernel
    /// says how much room it needs), so the operator group at the end counts.
    @Test(.enabled(if: canSwitchUser)) func allOfAPeersGroupsAreRead() async throws {
        let group: UInt32 = 4242
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [0], operatorGroupIDs: [group]), mode: 0o666)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        let groups = (0..<299).map { UInt32(20_000 + $0) } + [group]
        let reload = try await Self.afmctlAsNobody(server.path, ["reload"], gid: 4444, groups: groups)
        #expect(reload.status == 0, "\(reload.output)")
    }

    /// A process that dropped a group does not get it back from the group database. nobody's primary group in
    /// /etc/passwd is 65534 (nogroup); this process runs with gid 4444 and 300 other groups, none of them 65534.
    /// (The server used to fall back to getgrouplist(nobody) when its 256-entry buffer was too small.)
    @Test(.enabled(if: canSwitchUser)) func groupsAProcessDroppedDoNotCount() async throws {
        try #require(UserDatabase.groupID(named: "nogroup") == 65534, "this test needs nobody's group nogroup = 65534")
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [0], operatorGroupIDs: [65534]), mode: 0o666)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        let groups = (0..<300).map { UInt32(20_000 + $0) }
        let reload = try await Self.afmctlAsNobody(server.path, ["reload"], gid: 4444, groups: groups)
        #expect(reload.status == 77, "\(reload.output)")
        #expect(!server.daemon.calls.withLock { $0 }.contains("Reload"))
        // With the group actually held, it counts.
        #expect(try await Self.afmctlAsNobody(server.path, ["reload"], gid: 4444, groups: groups + [65534]).status == 0)
    }

    /// The socket file belongs to the configured group with mode 0660: members connect, others are refused by the
    /// file system before the server sees them.
    @Test(.enabled(if: canSwitchUser)) func socketGroupMembersConnectOthersDoNot() async throws {
        let group: UInt32 = 4243
        let server = try TestAdminServer(policy: AdminAccessPolicy(operatorGroups: []), mode: 0o660, group: group)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        let attributes = try FileManager.default.attributesOfItem(atPath: server.path)
        #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value == group)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o660)
        let member = try await Self.afmctlAsNobody(server.path, ["status"], groups: [group])
        #expect(member.status == 0, "\(member.output)")
        let other = try await Self.afmctlAsNobody(server.path, ["status"], groups: [4244])
        #expect(other.status == 77, "\(other.output)")
        #expect(other.output.contains("Permission denied"), "\(other.output)")
    }

    /// Another user holds idle connections (this test process, a plain user here); an operator's reload still gets
    /// a slot, because one user id may hold only part of them.
    @Test(.enabled(if: canSwitchUser)) func aFloodOfIdleConnectionsDoesNotStarveAReload() async throws {
        let group: UInt32 = 4245
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [], operatorGroupIDs: [group]), mode: 0o666)
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        var flood: [FileDescriptor] = []
        defer { for fd in flood { fd.close() } }
        for _ in 0..<100 { flood.append(try FileDescriptor.connectUnix(path: server.path)) }
        let reload = try await Self.afmctlAsNobody(server.path, ["reload", "--wait"], groups: [group])
        #expect(reload.status == 0, "\(reload.output)")
        #expect(server.daemon.calls.withLock { $0 }.contains("Reload"))
    }

    /// When other users hold every shared slot, an admin peer (root, the daemon's user; nobody here) still gets
    /// one of the reserved slots.
    @Test(.enabled(if: canSwitchUser)) func adminPeersHaveReservedSlots() async throws {
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [65534], operatorGroupIDs: []), mode: 0o666) {
            $0.maxConnections = 4
        }
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        var flood: [FileDescriptor] = []
        defer { for fd in flood { fd.close() } }
        for _ in 0..<4 { flood.append(try FileDescriptor.connectUnix(path: server.path)) }
        #expect(waitUntil(seconds: 2) { server.server.connectionCount == 4 })
        // A fifth plain user is refused with TooManyConnections…
        let fifth = try FileDescriptor.connectUnix(path: server.path)
        defer { fifth.close() }
        try fifth.setReceiveTimeout(milliseconds: 5_000)
        let refusal = String(decoding: try await offPool { try fifth.readSome() }, as: UTF8.self)
        #expect(refusal.contains("org.afm.Admin.TooManyConnections"), "\(refusal)")
        // …the admin is not.
        let reload = try await Self.afmctlAsNobody(server.path, ["reload"])
        #expect(reload.status == 0, "\(reload.output)")
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
