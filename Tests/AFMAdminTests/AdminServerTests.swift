// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMJSON
import AFMLogging
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// A running server on a temporary socket with a fake daemon behind it.
struct TestAdminServer {
    let directory = TestPaths.makeTemporaryDirectory("afm-admin")
    let path: String
    let server: AdminServer
    let daemon = FakeDaemon()

    init(
        policy: AdminAccessPolicy = AdminAccessPolicy(operatorGroups: []), mode: UInt32 = 0o660, group: UInt32? = nil,
        configure: (inout AdminServer.Configuration) -> Void = { _ in }
    ) throws {
        path = directory + "/admin.sock"
        var configuration = AdminServer.Configuration(socketPath: path, policy: policy)
        configuration.mode = mode
        configuration.group = group
        configure(&configuration)
        server = try AdminServer(configuration: configuration, handler: daemon, logger: Logger(label: "test", level: .error))
        try server.start()
    }

    var client: AdminClient { AdminClient(socketPath: path, timeoutMilliseconds: 10_000) }

    func stop() async {
        await server.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Sends raw bytes on a fresh connection and reads replies until `count` messages or EOF.
    func raw(_ bytes: [UInt8], replies count: Int) async throws -> (replies: [JSONValue], closed: Bool) {
        let path = self.path
        return try await offPool { try Self.rawBlocking(path: path, bytes, replies: count) }
    }

    private static func rawBlocking(path: String, _ bytes: [UInt8], replies count: Int) throws -> (replies: [JSONValue], closed: Bool) {
        let fd = try FileDescriptor.connectUnix(path: path)
        defer { fd.close() }
        try fd.setReceiveTimeout(milliseconds: 10_000)
        try fd.writeAll(bytes)
        var framer = VarlinkFramer()
        var replies: [JSONValue] = []
        while replies.count < count {
            if case .message(let frame)? = framer.next() {
                replies.append(try JSONParser.parse(frame))
                continue
            }
            let chunk = try fd.readSome()
            if chunk.isEmpty { return (replies, true) }
            framer.append(chunk)
        }
        return (replies, false)
    }
}

@Suite struct AdminServerTests {
    @Test func varlinkServiceInfoAndUserMethods() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        let info = try await server.client.call("org.varlink.service.GetInfo")
        #expect(info["product"]?.stringValue == "afmd")
        #expect(info["interfaces"]?.arrayValue?.contains("org.afm.Admin") == true)
        let status = try await server.client.call("org.afm.Admin.GetStatus")
        #expect(status["listener"]?["state"]?.stringValue == "running")
        #expect(status["uid"]?.numberValue?.intValue == Int(UserDatabase.effectiveUserID))
        let getInfo = try await server.client.call("org.afm.Admin.GetInfo")
        #expect(getInfo["level"]?.stringValue == "admin")  // uid 0 / the daemon's own uid
        let description = try await server.client.call("org.varlink.service.GetInterfaceDescription", ["interface": "org.afm.Admin"])
        #expect(description["description"]?.stringValue?.contains("method Reload") == true)
    }

    @Test func socketFileHasTheConfiguredMode() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        let attributes = try FileManager.default.attributesOfItem(atPath: server.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o660)
        #expect((attributes[.type] as? FileAttributeType) == .typeSocket)
    }

    @Test func streamingRepliesCarryContinues() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        var snapshots: [JSONValue] = []
        for try await reply in server.client.callWithMore("org.afm.Admin.WatchCounters", ["intervalMs": 100]) {
            snapshots.append(reply)
        }
        #expect(snapshots.map { $0["tokensOut"]?.numberValue?.intValue } == [10, 20, 30, 30])
        #expect(snapshots.first?["interval"]?.numberValue?.intValue == 100)
        // Without `more`, one reply.
        let single = try await server.client.call("org.afm.Admin.WatchCounters")
        #expect(single["tokensOut"]?.numberValue?.intValue == 10)
        // Raw: continues flags on all but the last.
        let call = VarlinkFramer.encode(["method": "org.afm.Admin.WatchCounters", "more": true])
        let (replies, _) = try await server.raw(call, replies: 4)
        #expect(replies.map { $0["continues"]?.boolValue ?? false } == [true, true, true, false])
    }

    @Test func reloadReportsProgressThenTheGenerationOrWhyNot() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        var replies: [JSONValue] = []
        for try await reply in server.client.callWithMore("org.afm.Admin.Reload", ["backend": "scripted"]) { replies.append(reply) }
        #expect(replies.map { $0["phase"]?.stringValue } == ["loading", "smoke-test", nil])
        #expect(replies.last?["generation"]?.numberValue?.intValue == 2)
        let plain = try await server.client.call("org.afm.Admin.Reload")
        #expect(plain["generation"]?.numberValue?.intValue == 2)
        let error = try await #require(throws: AdminClientError.self) {
            try await server.client.call("org.afm.Admin.Reload", ["backend": "broken"])
        }
        guard case .remote(let remote) = error else { Issue.record("expected a remote error, got \(error)"); return }
        #expect(remote.name == "org.afm.Admin.ReloadFailed")
        #expect(remote.parameters["activeGeneration"]?.numberValue?.intValue == 1)
        #expect(remote.message == "dlopen failed")
    }

    @Test(arguments: [
        ("org.afm.Admin.Reload", "operator"), ("org.afm.Admin.SetListener", "operator"),
        ("org.afm.Admin.SetPrompt", "admin"), ("org.afm.Admin.SetSetting", "admin"),
    ])
    func userLevelPeersAreRefusedPrivilegedMethods(method: String, required: String) async throws {
        // No admin uids and no operator groups: this process connects as a plain user.
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [], operatorGroupIDs: []))
        defer { Task { await server.stop() } }
        let error = try await #require(throws: AdminClientError.self) {
            try await server.client.call(method, ["state": "stopped", "text": "x", "key": "port", "value": "1"])
        }
        #expect(error == .remote(.permissionDenied(method: method, required: AdminLevel(name: required), granted: .user)))
        #expect(server.daemon.calls.withLock { $0 }.isEmpty, "the handler must not run")
        #expect(try await server.client.call("org.afm.Admin.GetStatus")["listener"] != nil)
    }

    @Test func operatorGroupMembershipGrantsOperator() async throws {
        let server = try TestAdminServer(
            policy: AdminAccessPolicy(adminUserIDs: [], operatorGroupIDs: [UInt32(getegid())]))
        defer { Task { await server.stop() } }
        #expect(try await server.client.call("org.afm.Admin.GetInfo")["level"]?.stringValue == "operator")
        #expect(try await server.client.call("org.afm.Admin.SetListener", ["state": "stopped"])["state"]?.stringValue == "stopped")
        await #expect(throws: AdminClientError.self) { try await server.client.call("org.afm.Admin.SetSetting", ["key": "port", "value": "1"]) }
    }

    @Test func badCallsGetVarlinkErrorsAndTheConnectionLivesOn() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        var bytes: [UInt8] = Array("{not json".utf8) + [0]
        bytes += Array("[1,2]".utf8) + [0]
        bytes += VarlinkFramer.encode(["method": "org.afm.Admin.Nope"])
        bytes += VarlinkFramer.encode(["method": "com.example.Other.Call"])
        bytes += VarlinkFramer.encode(["parameters": [:]])
        bytes += VarlinkFramer.encode(["method": "org.afm.Admin.SetListener", "parameters": ["state": "sideways"]])
        bytes += VarlinkFramer.encode(["method": "org.afm.Admin.GetPrompt", "parameters": 5])
        bytes += VarlinkFramer.encode(["method": "org.afm.Admin.GetPrompt", "oneway": true])
        bytes += VarlinkFramer.encode(["method": "org.afm.Admin.GetPrompt"])
        let (replies, closed) = try await server.raw(bytes, replies: 8)
        #expect(!closed)
        #expect(replies.map { $0["error"]?.stringValue } == [
            "org.afm.Admin.MalformedCall", "org.afm.Admin.MalformedCall", "org.varlink.service.MethodNotFound",
            "org.varlink.service.InterfaceNotFound", "org.afm.Admin.MalformedCall", "org.varlink.service.InvalidParameter",
            "org.varlink.service.InvalidParameter", nil,
        ])
        #expect(replies[7]["parameters"]?["text"]?.stringValue == "Be brief.")
        #expect(replies[3]["parameters"]?["interface"]?.stringValue == "com.example.Other")
    }

    @Test func oversizedFramesAreRefusedAndTheServerSurvives() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        let big = Array(#"{"method":"org.afm.Admin.SetPrompt","parameters":{"text":""#.utf8) + [UInt8](repeating: 0x61, count: (1 << 20) + 10)
        let (replies, closed) = try await server.raw(big, replies: 2)
        #expect(replies.first?["error"]?.stringValue == "org.afm.Admin.FrameTooLarge")
        #expect(closed)
        // Just under the limit is fine.
        let fits = VarlinkFramer.encode(["method": "org.afm.Admin.GetStatus", "parameters": ["pad": .string(String(repeating: "b", count: 1_000_000))]])
        #expect(try await server.raw(fits, replies: 1).replies.first?["parameters"]?["listener"] != nil)
        #expect(try await server.client.call("org.afm.Admin.GetStatus")["listener"] != nil)
    }

    @Test func manyClientsAtOnce() async throws {
        let server = try TestAdminServer()
        defer { Task { await server.stop() } }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<24 {
                group.addTask { _ = try await server.client.call("org.afm.Admin.ListBackends") }
            }
            try await group.waitForAll()
        }
        #expect(server.daemon.calls.withLock { $0.count } == 24)
    }

    @Test func staleSocketIsReplacedLiveOneIsNot() async throws {
        let first = try TestAdminServer()
        // A second server on the same path must refuse while the first serves.
        let second = try AdminServer(
            configuration: .init(socketPath: first.path, policy: AdminAccessPolicy(operatorGroups: [])), handler: FakeDaemon(),
            logger: Logger(label: "test", level: .error))
        #expect(throws: UnixListenerError.inUse(path: first.path)) { try second.start() }
        #expect(try await first.client.call("org.afm.Admin.GetStatus")["listener"] != nil)
        // A stale socket file (bound, never served) is removed and replaced.
        let stalePath = first.directory + "/stale.sock"
        let stale = try FileDescriptor.makeUnixListener(path: stalePath)
        stale.close()
        #expect(FileManager.default.fileExists(atPath: stalePath))
        let third = try AdminServer(
            configuration: .init(socketPath: stalePath, policy: AdminAccessPolicy(operatorGroups: [])), handler: FakeDaemon(),
            logger: Logger(label: "test", level: .error))
        try third.start()
        #expect(try await AdminClient(socketPath: stalePath).call("org.afm.Admin.GetStatus")["listener"] != nil)
        await third.stop()
        #expect(!FileManager.default.fileExists(atPath: stalePath))
        // Not a socket: left alone.
        let filePath = first.directory + "/plain"
        _ = FileManager.default.createFile(atPath: filePath, contents: Data("x".utf8))
        #expect(throws: UnixListenerError.notASocket(path: filePath)) { try FileDescriptor.makeUnixListener(path: filePath) }
        await first.stop()
    }

    @Test func stopClosesStreamingClients() async throws {
        let server = try TestAdminServer()
        let fd = try FileDescriptor.connectUnix(path: server.path)
        defer { fd.close() }
        try fd.setReceiveTimeout(milliseconds: 5_000)
        // An idle connection after one call: stop must close it.
        try fd.writeAll(VarlinkFramer.encode(["method": "org.afm.Admin.GetStatus"]))
        _ = try await offPool { try fd.readSome() }
        await server.stop()
        #expect(try await offPool { try fd.readSome() }.isEmpty, "the server closes idle connections on stop")
        #expect(!FileManager.default.fileExists(atPath: server.path))
        #expect(server.server.connectionCount == 0)
    }

    /// A connection that sends nothing, or only part of a call, is closed after the idle timeout (10 s by default,
    /// 300 ms here), so it cannot hold a slot forever.
    @Test func idleAndIncompleteConnectionsAreClosed() async throws {
        #expect(AdminServer.Configuration(socketPath: "/x", policy: AdminAccessPolicy(operatorGroups: [])).idleTimeoutMilliseconds == 10_000)
        let server = try TestAdminServer { $0.idleTimeoutMilliseconds = 300 }
        defer { Task { await server.stop() } }
        let silent = try FileDescriptor.connectUnix(path: server.path)
        defer { silent.close() }
        let partial = try FileDescriptor.connectUnix(path: server.path)
        defer { partial.close() }
        try partial.writeAll(Array(#"{"method":"org.afm.Admin.GetSta"#.utf8))
        let started = ContinuousClock.now
        for fd in [silent, partial] {
            let ready = try await offPool { try fd.poll(readable: true, writable: false, timeoutMilliseconds: 15_000) }
            #expect(ready.readable, "the server must close an idle connection")
            if ready.readable { #expect(try fd.readSome().isEmpty) }
        }
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(waitUntil(seconds: 2) { server.server.connectionCount == 0 })
        // A fresh connection is served as usual, and a connection between calls gets the same time again.
        #expect(try await server.client.call("org.afm.Admin.GetStatus")["listener"] != nil)
        let slow = try FileDescriptor.connectUnix(path: server.path)
        defer { slow.close() }
        try slow.setReceiveTimeout(milliseconds: 5_000)
        for _ in 0..<3 {
            try await Task.sleep(for: .milliseconds(150))
            try slow.writeAll(VarlinkFramer.encode(["method": "org.afm.Admin.GetStatus"]))
            #expect(try await offPool { try slow.readSome() }.isEmpty == false)
        }
    }

    /// Opens a connection that asks for a counter stream and keeps it open (its stream has ended; the connection
    /// holds its slot until the idle timeout), as a runner of the daemon's user flooding the socket would.
    static func holdWatchCounters(_ server: TestAdminServer) async throws -> FileDescriptor {
        let fd = try FileDescriptor.connectUnix(path: server.path)
        try fd.setReceiveTimeout(milliseconds: 5_000)
        try fd.writeAll(VarlinkFramer.encode(["method": "org.afm.Admin.WatchCounters", "more": true]))
        #expect(try await offPool { try fd.readSome() }.isEmpty == false)
        return fd
    }

    /// The refusal a fresh connection gets unasked (the server writes it and closes), or nil when it is served.
    static func refusal(_ server: TestAdminServer) async throws -> JSONValue? {
        let fd = try FileDescriptor.connectUnix(path: server.path)
        defer { fd.close() }
        try fd.setReceiveTimeout(milliseconds: 5_000)
        let ready = try await offPool { try fd.poll(readable: true, writable: false, timeoutMilliseconds: 1_000) }
        guard ready.readable else { return nil }
        var framer = VarlinkFramer()
        framer.append(try fd.readSome())
        guard case .message(let frame)? = framer.next() else { return nil }
        return try JSONParser.parse(frame)
    }

    /// An admin uid (root for `systemctl reload`, whose ExecReload= runs afmctl as root) keeps its own reserved slots
    /// beyond the per-user cap: a flood of its own connections cannot take them from its next call, and another
    /// admin uid's flood (a runner of the daemon's user) cannot either. The refusal names the cap that applied.
    @Test func anAdminUidKeepsItsReservedSlotsBeyondThePerUserCap() async throws {
        let other: UInt32 = 65534
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [getuid(), other], operatorGroupIDs: []), mode: 0o666) {
            $0.maxConnectionsPerUser = 2
            $0.reservedAdminConnections = 1
            $0.maxConnections = 2
        }
        defer { Task { await server.stop() } }
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: server.directory)
        var held: [FileDescriptor] = []
        defer { for fd in held { fd.close() } }
        for _ in 0..<2 { held.append(try await Self.holdWatchCounters(server)) }
        #expect(waitUntil(seconds: 2) { server.server.connectionCount == 2 })
        // The third connection of the same admin uid is served from its reserved slot.
        let reload = try await server.client.call("org.afm.Admin.Reload")
        #expect(reload["generation"]?.numberValue?.intValue == 2)
        #expect(waitUntil(seconds: 2) { server.server.connectionCount == 2 })
        held.append(try await Self.holdWatchCounters(server))
        #expect(waitUntil(seconds: 2) { server.server.connectionCount == 3 })
        // Reserved slot taken too: refused, and the limit reported is this user's (2 shared + 1 reserved), not 64.
        let refused = try #require(try await Self.refusal(server))
        #expect(refused["error"]?.stringValue == "org.afm.Admin.TooManyConnections", "\(refused)")
        #expect(refused["parameters"]?["limit"]?.numberValue?.intValue == 3, "\(refused)")
        #expect(refused["parameters"]?["scope"]?.stringValue == "user", "\(refused)")
        // Every shared slot and this uid's reserve are taken; another admin uid (root, while the daemon's user
        // floods) still has a reserve of its own.
        guard UnprivilegedPeerTests.canSwitchUser else { return }
        let otherReload = try await UnprivilegedPeerTests.afmctlAsNobody(server.path, ["reload"])
        #expect(otherReload.status == 0, "\(otherReload.output)")
    }

    /// A plain user refused by the per-user cap is told that cap, not the server-wide one.
    @Test func aRefusalReportsThePerUserCapThatApplied() async throws {
        let server = try TestAdminServer(policy: AdminAccessPolicy(adminUserIDs: [], operatorGroupIDs: [])) {
            $0.maxConnectionsPerUser = 2
        }
        defer { Task { await server.stop() } }
        var held: [FileDescriptor] = []
        defer { for fd in held { fd.close() } }
        for _ in 0..<2 { held.append(try await Self.holdWatchCounters(server)) }
        #expect(waitUntil(seconds: 2) { server.server.connectionCount == 2 })
        let refused = try #require(try await Self.refusal(server))
        #expect(refused["error"]?.stringValue == "org.afm.Admin.TooManyConnections", "\(refused)")
        #expect(refused["parameters"]?["limit"]?.numberValue?.intValue == 2, "\(refused)")
        #expect(refused["parameters"]?["scope"]?.stringValue == "user", "\(refused)")
        #expect(refused["parameters"]?["message"]?.stringValue?.contains("2") == true, "\(refused)")
    }

    @Test func cannotConnectNamesThePath() async throws {
        let error = try await #require(throws: AdminClientError.self) {
            try await AdminClient(socketPath: "/nonexistent/afm/admin.sock").call("org.afm.Admin.GetStatus")
        }
        #expect(error.description.hasPrefix("cannot connect to the admin socket /nonexistent/afm/admin.sock: "))
    }
}

extension AdminLevel {
    init(name: String) { self = AdminLevel.allCases.first { $0.description == name }! }  // Test table names are valid.
}
