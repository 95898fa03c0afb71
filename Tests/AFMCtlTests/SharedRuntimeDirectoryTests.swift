// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Synchronization
import Testing

/// Without `XDG_RUNTIME_DIR`, afmctl and afmd use `/tmp/afm-UID`, which another local user can create first.
/// Both must refuse such a directory (naming its path, owner and mode) and create a missing one with mode 0700.
///
/// Runs afmctl and afmd as an unused uid (setpriv, so the test needs root); "another user" is uid 65534 (chown).
/// Each test takes its own uid, so parallel runs on one machine do not share a `/tmp/afm-UID`.
@Suite(.serialized) struct SharedRuntimeDirectoryTests {
    struct Outcome {
        var status: Int32
        var output: String
    }

    /// An unused uid with its `/tmp/afm-UID` path (removed first and at the end).
    struct Victim {
        let uid = UInt32.random(in: 50_000..<60_000)
        var directory: String { "/tmp/afm-\(uid)" }
        var home: String { "/tmp/afm-home-\(uid)" }

        func clean() {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: home)
        }

        /// Runs `executable arguments` as this uid with no XDG_RUNTIME_DIR and no AFM_ADMIN_SOCKET, up to `seconds`
        /// (then SIGKILL); once `stopWhen` holds it gets SIGTERM. `withHome: false` leaves HOME unset too.
        func run(
            _ executable: String, _ arguments: [String], environment: [String: String] = [:], seconds: Double = 20,
            withHome: Bool = true, stopWhen: (@Sendable (_ pid: Int32) -> Bool)? = nil
        ) async throws -> Outcome {
            let uid = self.uid
            let base = withHome ? ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"] : ["PATH": "/usr/bin:/bin"]
            return try await withCheckedThrowingContinuation { continuation in
                Thread {
                    continuation.resume(with: Result {
                        let process = Process()
                        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                        process.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", executable] + arguments
                        process.environment = base.merging(environment) { $1 }
                        let pipe = Pipe()
                        process.standardOutput = pipe
                        process.standardError = pipe
                        try process.run()
                        let deadline = Date().addingTimeInterval(seconds)
                        var stopped = false
                        while process.isRunning && Date() < deadline {
                            if !stopped, let stopWhen, stopWhen(process.processIdentifier) {
                                kill(process.processIdentifier, SIGTERM)
                                stopped = true
                            }
                            usleep(20_000)
                        }
                        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
                        let data = pipe.fileHandleForReading.readDataToEndOfFile()
                        process.waitUntilExit()
                        return Outcome(status: process.terminationStatus, output: String(decoding: data, as: UTF8.self))
                    })
                }.start()
            }
        }
    }

    /// Makes `path` a directory owned by `owner` with `mode`.
    static func makeDirectory(_ path: String, owner: UInt32, mode: Int) throws {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        try #require(chown(path, owner, owner) == 0)
        try #require(chmod(path, mode_t(mode)) == 0)
    }

    static let canSwitchUser = getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv")
    static var afmctl: String { TestPaths.binDirectory + "/afmctl" }

    @Test(.enabled(if: canSwitchUser)) func afmctlRefusesADirectoryOfAnotherUser() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        // Another user's directory, even one as private as 0700, could hold a fake admin.sock.
        try Self.makeDirectory(victim.directory, owner: 65534, mode: 0o700)
        let result = try await victim.run(Self.afmctl, ["status"])
        #expect(result.status == 77, "\(result.output)")
        #expect(result.output.contains("Error: \(victim.directory) is not a private directory"), "\(result.output)")
        #expect(result.output.contains("owner uid 65534") && result.output.contains("mode 0700"), "\(result.output)")
        #expect(result.output.contains("needs owner uid \(victim.uid)"), "\(result.output)")
    }

    @Test(.enabled(if: canSwitchUser)) func afmctlRefusesItsOwnDirectoryWithAWiderMode() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        try Self.makeDirectory(victim.directory, owner: victim.uid, mode: 0o755)
        let result = try await victim.run(Self.afmctl, ["status"])
        #expect(result.status == 77, "\(result.output)")
        #expect(result.output.contains("owner uid \(victim.uid) and mode 0755"), "\(result.output)")
    }

    @Test(.enabled(if: canSwitchUser)) func afmctlRefusesASymlink() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        // A link to a directory the victim owns with mode 0700 still is not the directory: it could be repointed.
        let target = TestPaths.makeTemporaryDirectory("afm-link-target")
        defer { try? FileManager.default.removeItem(atPath: target) }
        try #require(chown(target, victim.uid, victim.uid) == 0 && chmod(target, 0o700) == 0)
        try FileManager.default.createSymbolicLink(atPath: victim.directory, withDestinationPath: target)
        let result = try await victim.run(Self.afmctl, ["status"])
        #expect(result.status == 77, "\(result.output)")
        #expect(result.output.contains("\(victim.directory) is not a private directory: it is a symbolic link"), "\(result.output)")
    }

    /// The `make run` checkout lookup walks up from the working directory: in a world-writable directory such as
    /// `/tmp`, another user can plant `.build/afm/root/run/afm/admin.sock` above where the victim works. afmctl must
    /// not talk to it (before, it connected to the first such socket it found, whoever owned it).
    @Test(.enabled(if: canSwitchUser)) func afmctlIgnoresACheckoutSocketPlantedByAnotherUser() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        let shared = "/tmp/afm-plant-\(victim.uid)"
        try? FileManager.default.removeItem(atPath: shared)
        defer { try? FileManager.default.removeItem(atPath: shared) }
        try Self.makeDirectory(shared, owner: 0, mode: 0o1777)  // like /tmp
        try Self.makeDirectory(shared + "/work", owner: victim.uid, mode: 0o755)
        var planted = shared
        for component in [".build", "afm", "root", "run", "afm"] {
            planted += "/" + component
            try Self.makeDirectory(planted, owner: 65534, mode: 0o755)
        }
        planted += "/admin.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(listener >= 0)
        defer { close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in planted.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0 && listen(listener, 8) == 0)
        try #require(chown(planted, 65534, 65534) == 0 && chmod(planted, 0o666) == 0)
        let result = try await victim.run("/bin/sh", ["-c", "cd \(shared)/work && exec \(Self.afmctl) status"], seconds: 10)
        // A connection afmctl made waits in the backlog even after it closed: accept tells whether there was one.
        _ = fcntl(listener, F_SETFL, fcntl(listener, F_GETFL) | O_NONBLOCK)
        let connection = accept(listener, nil, nil)
        if connection >= 0 { close(connection) }
        #expect(connection < 0, "afmctl connected to the planted socket: \(result.output)")
        #expect(!result.output.contains(planted), "\(result.output)")
        #expect(result.output.contains("\(victim.directory)/admin.sock"), "\(result.output)")
    }

    @Test(.enabled(if: canSwitchUser)) func afmctlCreatesAMissingDirectoryPrivate() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        let result = try await victim.run(Self.afmctl, ["status"])
        // Nobody serves it yet: "no such socket", not a refusal.
        #expect(result.status == 69, "\(result.output)")
        #expect(result.output.contains("\(victim.directory)/admin.sock"), "\(result.output)")
        let attributes = try FileManager.default.attributesOfItem(atPath: victim.directory)
        #expect((attributes[.ownerAccountID] as? NSNumber)?.uint32Value == victim.uid)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
        // Help and version need no directory at all.
        victim.clean()
        #expect(try await victim.run(Self.afmctl, ["--version"]).status == 0)
        #expect(!FileManager.default.fileExists(atPath: victim.directory))
    }

    @Test(.enabled(if: canSwitchUser)) func afmdRefusesAWorldWritableDirectoryOfAnotherUser() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        // Mode 0777: on today's code afmd put its admin socket and its backend copies (dlopen) in there.
        try Self.makeDirectory(victim.directory, owner: 65534, mode: 0o777)
        let backends = TestPaths.makeTemporaryDirectory("afm-shared-runtime-backends")
        defer { try? FileManager.default.removeItem(atPath: backends) }
        try #require(chmod(backends, 0o755) == 0)
        let result = try await victim.run(TestPaths.afmd, ["--listen", "127.0.0.1:0", "--backend-dir", backends], seconds: 10)
        #expect(result.status == 77, "\(result.output)")
        #expect(result.output.contains("Error: \(victim.directory) is not a private directory"), "\(result.output)")
        #expect(result.output.contains("owner uid 65534 and mode 0777"), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: victim.directory + "/admin.sock"))
        #expect(!FileManager.default.fileExists(atPath: victim.directory + "/backend-copies"))
    }

    @Test(.enabled(if: canSwitchUser)) func afmdCreatesAMissingDirectoryPrivateAndServesThere() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        let backends = TestPaths.makeTemporaryDirectory("afm-shared-runtime-backends")
        defer { try? FileManager.default.removeItem(atPath: backends) }
        try #require(chmod(backends, 0o755) == 0)
        // Stopped (SIGTERM) as soon as its admin socket appears in the directory.
        let socket = victim.directory + "/admin.sock"
        let result = try await victim.run(TestPaths.afmd, ["--listen", "127.0.0.1:0", "--backend-dir", backends], seconds: 15) { _ in
            FileManager.default.fileExists(atPath: socket)
        }
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("admin socket ready"), "\(result.output)")
        #expect(result.output.contains(socket), "\(result.output)")
        let attributes = try FileManager.default.attributesOfItem(atPath: victim.directory)
        #expect((attributes[.ownerAccountID] as? NSNumber)?.uint32Value == victim.uid)
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o700)
    }

    /// A process of afmd's own user (a compromised backend runner) cannot read afmd's memory or environment through
    /// /proc: afmd is not dumpable.
    @Test(.enabled(if: canSwitchUser)) func afmdIsNotInspectableByProcessesOfItsUser() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        let backends = TestPaths.makeTemporaryDirectory("afm-shared-runtime-backends")
        defer { try? FileManager.default.removeItem(atPath: backends) }
        try #require(chmod(backends, 0o755) == 0)
        let socket = victim.directory + "/admin.sock"
        let uid = victim.uid
        let probes = Mutex<[Int32]>([])
        _ = try await victim.run(TestPaths.afmd, ["--listen", "127.0.0.1:0", "--backend-dir", backends], seconds: 15) { pid in
            guard FileManager.default.fileExists(atPath: socket) else { return false }
            // As afmd's uid: read its environment, and open its memory.
            for file in ["environ", "mem"] {
                let probe = Process()
                probe.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
                probe.arguments = ["--reuid=\(uid)", "--regid=\(uid)", "--clear-groups", "/bin/dd", "if=/proc/\(pid)/\(file)", "of=/dev/null", "count=0"]
                probe.standardError = FileHandle.nullDevice
                try? probe.run()
                probe.waitUntilExit()
                probes.withLock { $0.append(probe.terminationStatus) }
            }
            return true
        }
        let statuses = probes.withLock { $0 }
        #expect(statuses.count == 2 && statuses.allSatisfy { $0 != 0 }, "dd exit statuses: \(statuses)")
    }

    /// Under systemd, `ExecReload=/usr/bin/afmctl reload --wait` runs as the service user (not root) without
    /// XDG_RUNTIME_DIR but with RUNTIME_DIRECTORY=/run/afm: afmctl must find the daemon's socket there, not in
    /// /tmp/afm-UID (a private /tmp under PrivateTmp=, where no daemon listens).
    @Test(.enabled(if: canSwitchUser)) func afmctlFindsTheServiceSocketThroughRuntimeDirectory() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        // systemd's RuntimeDirectory=afm: a directory called afm.
        let parent = TestPaths.makeTemporaryDirectory("afm-service-runtime")
        defer { try? FileManager.default.removeItem(atPath: parent) }
        try #require(chmod(parent, 0o755) == 0)
        let runtime = parent + "/afm"
        try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false)
        try #require(chown(runtime, victim.uid, victim.uid) == 0 && chmod(runtime, 0o755) == 0)
        let result = try await victim.run(Self.afmctl, ["status"], environment: ["RUNTIME_DIRECTORY": runtime + ":/run/other"])
        // Nobody listens there: the message names the path afmctl chose.
        #expect(result.status == 69, "\(result.output)")
        #expect(result.output.contains(runtime + "/admin.sock"), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: victim.directory))
    }

    /// Root running afmctl from inside another unit (whose RuntimeDirectory=foo sets RUNTIME_DIRECTORY=/run/foo) must
    /// still talk to afmd's /run/afm/admin.sock, not to a socket in that unit's directory.
    @Test(.enabled(if: getuid() == 0)) func rootIgnoresTheRuntimeDirectoryOfAnotherUnit() async throws {
        let other = TestPaths.makeTemporaryDirectory("afm-other-unit") + "/foo"
        defer { try? FileManager.default.removeItem(atPath: (other as NSString).deletingLastPathComponent) }
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: false)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.afmctl)
        process.arguments = ["status"]
        process.environment = ["PATH": "/usr/bin:/bin", "RUNTIME_DIRECTORY": other]
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(!output.contains(other), "\(output)")
        #expect(output.contains("/run/afm/admin.sock") || process.terminationStatus == 0, "\(output)")
    }

    /// Without HOME the config and state directories must not come from /tmp/afm-home-UID, which another user can
    /// create first with a config of theirs (backends, listen address): afmd takes the home from the user database,
    /// and a uid without an entry gets that directory only when it is its own and private.
    @Test(.enabled(if: canSwitchUser)) func afmdWithoutHomeRefusesAHomeDirectoryOfAnotherUser() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        try Self.makeDirectory(victim.home, owner: 65534, mode: 0o755)
        try Self.makeDirectory(victim.home + "/.config", owner: 65534, mode: 0o755)
        try Self.makeDirectory(victim.home + "/.config/afm", owner: 65534, mode: 0o755)
        let config = victim.home + "/.config/afm/afmd.conf"
        try "[Server]\nListen=0.0.0.0:47999\n".write(toFile: config, atomically: false, encoding: .utf8)
        try #require(chown(config, 65534, 65534) == 0)
        let result = try await victim.run(TestPaths.afmd, ["--check-config"], seconds: 10, withHome: false)
        #expect(result.status != 0, "\(result.output)")
        #expect(result.output.contains("\(victim.home) is not a private directory"), "\(result.output)")
        #expect(result.output.contains("owner uid 65534"), "\(result.output)")
        #expect(!result.output.contains("47999") && !result.output.contains("0.0.0.0"), "\(result.output)")
    }

    /// The backend copies go to `<runtime>/backend-copies` on every reload. A /tmp/afm-UID that a tmp cleaner removed
    /// and another user re-created after afmd started must be refused then, not written into.
    @Test(.enabled(if: canSwitchUser)) func afmdReloadRefusesARuntimeDirectoryReplacedByAnotherUser() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        let backends = BackendDirectoryBuilder()
        defer { try? FileManager.default.removeItem(atPath: backends.path) }
        try #require(chmod(backends.path, 0o755) == 0)
        try backends.addScripted()
        let directory = victim.directory
        let copies = directory + "/backend-copies"
        let library = backends.path + "/scripted.so"
        /// 0: wait for the first copy; 1: replaced and SIGHUP sent at `since`; then stop after a while.
        let phase = Mutex<(step: Int, since: Date)>((0, Date()))
        let result = try await victim.run(TestPaths.afmd, ["--listen", "127.0.0.1:0", "--backend-dir", backends.path], seconds: 30) { pid in
            let (step, since) = phase.withLock { ($0.step, $0.since) }
            switch step {
            case 0:
                guard FileManager.default.fileExists(atPath: directory + "/admin.sock"),
                    let names = try? FileManager.default.contentsOfDirectory(atPath: copies), !names.isEmpty
                else { return false }
                // What a tmp cleaner and another user do: the directory goes, a world-writable one of theirs comes.
                try? FileManager.default.removeItem(atPath: directory)
                try? Self.makeDirectory(directory, owner: 65534, mode: 0o777)
                // Other bytes in the library (one appended: the loader ignores it), so the reload writes a new copy.
                if var bytes = FileManager.default.contents(atPath: library) {
                    bytes.append(0)
                    _ = FileManager.default.createFile(atPath: library + ".new", contents: bytes)
                    _ = rename(library + ".new", library)
                }
                kill(pid, SIGHUP)
                phase.withLock { $0 = (1, Date()) }
                return false
            default:
                return Date().timeIntervalSince(since) > 3
            }
        }
        #expect(phase.withLock { $0.step } == 1, "afmd never wrote its first copy: \(result.output)")
        #expect(result.output.contains("\(directory) is not a private directory"), "\(result.output)")
        #expect(!FileManager.default.fileExists(atPath: copies), "afmd wrote into the other user's directory")
    }

    /// XDG_RUNTIME_DIR=/tmp (a world-writable directory) puts the socket in `/tmp/afm`, which anyone can create
    /// first: afmctl checks it like `/tmp/afm-UID`.
    @Test(.enabled(if: canSwitchUser)) func afmctlChecksAnAfmDirectoryInAWorldWritableRuntimeDir() async throws {
        let victim = Victim()
        victim.clean()
        defer { victim.clean() }
        let sticky = TestPaths.makeTemporaryDirectory("afm-sticky-runtime")
        defer { try? FileManager.default.removeItem(atPath: sticky) }
        try #require(chmod(sticky, 0o1777) == 0)
        try Self.makeDirectory(sticky + "/afm", owner: 65534, mode: 0o755)
        let result = try await victim.run(Self.afmctl, ["status"], environment: ["XDG_RUNTIME_DIR": sticky])
        #expect(result.status == 77, "\(result.output)")
        #expect(result.output.contains("\(sticky)/afm is not a private directory"), "\(result.output)")
    }
}
