// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSystem
import AFMTestSupport
import Foundation
import Testing

/// Who may reach what in a real afmd: the admin socket's group (`Admin.SocketGroup`), and the runner processes,
/// which must hold no admin-socket descriptor and see no admin-socket path in their environment.
@Suite struct TrustBoundaryTests {
    static let canSwitchUser = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")

    /// `afmctl --socket SOCKET ARGS` as uid 65534 with exactly `groups` as supplementary groups.
    static func afmctlAsNobody(_ socket: String, _ arguments: [String], groups: [UInt32]) throws -> (status: Int32, output: String) {
        let result = try CommandOutput.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--groups=" + groups.map(String.init).joined(separator: ","),
            TestPaths.binDirectory + "/afmctl", "--socket", socket] + arguments)
        return (result.status, result.output)
    }

    /// `[Admin] SocketGroup=` gives the socket file that group and mode 0660: a member of the group connects (and
    /// is an operator when the group is also in OperatorGroups), anyone else is refused.
    @Test(.enabled(if: canSwitchUser)) func theSocketBelongsToTheConfiguredGroup() throws {
        let group: UInt32 = 4246
        let backends = BackendDirectoryBuilder()
        try backends.addScripted()
        let daemon = try DaemonProcess(
            backendDirectory: backends.path, config: "[Admin]\nSocketGroup=\(group)\nOperatorGroups=\(group)\n")
        defer { daemon.stop() }
        // afmd logs "listening on" before it opens the admin socket.
        #expect(waitUntil(seconds: 10) { daemon.log.contains("admin socket ready") })
        let attributes = try FileManager.default.attributesOfItem(atPath: daemon.adminSocket)
        #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value == group)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o660)
        let member = try Self.afmctlAsNobody(daemon.adminSocket, ["reload", "--wait"], groups: [group])
        #expect(member.status == 0, "\(member.output)")
        let other = try Self.afmctlAsNobody(daemon.adminSocket, ["status"], groups: [group + 1])
        #expect(other.status == 77, "\(other.output)")
    }

    /// An unknown group leaves the socket with the daemon's group (never wider) and says so in the log.
    @Test func anUnknownSocketGroupIsReportedAndNotUsed() throws {
        let backends = BackendDirectoryBuilder()
        try backends.addScripted()
        let daemon = try DaemonProcess(backendDirectory: backends.path, config: "[Admin]\nSocketGroup=no-such-group-afm\n")
        defer { daemon.stop() }
        #expect(waitUntil(seconds: 10) { daemon.log.contains("admin socket ready") })
        let attributes = try FileManager.default.attributesOfItem(atPath: daemon.adminSocket)
        #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value == getegid())
        #expect(daemon.log.contains("Admin.SocketGroup names no group"), "\(daemon.log)")
        #expect(try daemon.afmctl(["status"]).status == 0)
    }

    /// A runner (same uid as afmd) gets no admin-socket descriptor, neither the listener nor an accepted
    /// connection that is open while it starts, and no admin-socket path in its environment.
    @Test func aRunnerHoldsNoAdminSocket() throws {
        let backends = BackendDirectoryBuilder()
        try backends.addCFixture(hosting: "runner")
        let scratch = TestPaths.makeTemporaryDirectory("afm-trust")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let socket = scratch + "/admin.sock"
        let daemon = try DaemonProcess(backendDirectory: backends.path, environment: ["AFM_ADMIN_SOCKET": socket])
        defer { daemon.stop() }
        func runnerPID() throws -> Int32? {
            let status = try #require(try TestHTTPClient(port: daemon.port).get("/status").json)
            let backend = status["backends"]?.arrayValue?.first { $0["id"] == "c-fixture" }
            return backend?["runner_pid"]?.numberValue?.intValue.map(Int32.init)
        }
        let first = try #require(try runnerPID())
        #expect(waitUntil(seconds: 10) { daemon.log.contains("admin socket ready") })
        // An accepted admin connection stays open while a reload starts the next runner.
        let held = try FileDescriptor.connectUnix(path: socket)
        defer { held.close() }
        let reload = try afmctl(socket, ["reload", "c-fixture", "--wait"])
        #expect(reload.status == 0, "\(reload.output)")
        #expect(waitUntil(seconds: 10) { ((try? runnerPID()) ?? nil).map { $0 != first } ?? false })
        let runner = try #require(try runnerPID())

        // Every socket bound to the admin path, listener and accepted ones (/proc/net/unix shows both with the path).
        let adminInodes = Set(readProcFile("/proc/net/unix").split(separator: "\n").compactMap { line -> String? in
            let fields = line.split(separator: " ")
            guard fields.count >= 8, fields[7] == socket else { return nil }
            return "socket:[\(fields[6])]"
        })
        #expect(adminInodes.count >= 2, "the listener and the held connection")
        let daemonTargets = Self.descriptorTargets(daemon.process.processIdentifier)
        #expect(!adminInodes.isDisjoint(with: daemonTargets.values), "afmd holds the admin socket")
        let runnerTargets = Self.descriptorTargets(runner)
        #expect(adminInodes.isDisjoint(with: runnerTargets.values), "\(runnerTargets)")
        #expect(runnerTargets.keys.sorted() == [0, 1, 2, 3], "\(runnerTargets)")
        let environment = readProcFile("/proc/\(runner)/environ").split(separator: "\0").map(String.init)
        #expect(!environment.contains { $0.hasPrefix("AFM_ADMIN") || $0.contains(socket) }, "\(environment)")
        #expect(environment.contains("AFM_BACKEND_ID=c-fixture"), "\(environment)")
    }

    /// `/proc/PID/fd`: descriptor number → link target.
    static func descriptorTargets(_ pid: Int32) -> [Int: String] {
        var result: [Int: String] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? [] {
            guard let number = Int(name),
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(name)")
            else { continue }
            result[number] = target
        }
        return result
    }

    func afmctl(_ socket: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try CommandOutput.run(TestPaths.binDirectory + "/afmctl", ["--socket", socket] + arguments)
        return (result.status, result.output)
    }
}
