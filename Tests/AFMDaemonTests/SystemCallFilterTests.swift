// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// afmd under the system call filter of `share/systemd/afmd.service` (its `SystemCallFilter=` lines, expanded by
/// `systemd-analyze syscall-filter`, applied with libseccomp like systemd does with `SystemCallErrorNumber=EPERM`):
/// a backend in a runner (posix_spawn, socketpair, dlopen), the private cloud (libcurl to another afmd), a reload
/// that starts a new runner, and the admin socket's group (chown) all still work.
///
/// Needs cc, libseccomp.so.2 (a dependency of systemd) and systemd-analyze; fails when one is missing.
@Suite struct SystemCallFilterTests {
    static let unit = TestPaths.root + "/share/systemd/afmd.service"

    /// Runs the program after loading an allow-list filter (everything else fails with EPERM), as systemd does.
    static let filterSource = #"""
        #include <errno.h>
        #include <stdint.h>
        #include <stdio.h>
        #include <sys/prctl.h>
        #include <unistd.h>
        /* libseccomp's API (no headers needed: libseccomp-dev is not installed). */
        extern void *seccomp_init(uint32_t action);
        extern int seccomp_rule_add(void *context, uint32_t action, int call, unsigned int count, ...);
        extern int seccomp_syscall_resolve_name(const char *name);
        extern int seccomp_load(void *context);
        int main(int argc, char **argv) {
            if (argc < 3) return 64;
            FILE *list = fopen(argv[1], "r");
            if (!list) { perror(argv[1]); return 66; }
            void *context = seccomp_init(0x00050000U | EPERM); /* SCMP_ACT_ERRNO(EPERM) */
            char name[128];
            while (fscanf(list, "%127s", name) == 1) {
                int call = seccomp_syscall_resolve_name(name);
                if (call >= 0) seccomp_rule_add(context, 0x7fff0000U /* SCMP_ACT_ALLOW */, call, 0);
            }
            fclose(list);
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || seccomp_load(context) != 0) { perror("seccomp"); return 71; }
            execv(argv[2], argv + 2);
            perror(argv[2]);
            return 127;
        }
        """#

    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try CommandOutput.run(executable, arguments)
        return (result.status, result.output)
    }

    /// The system calls the unit allows: its `SystemCallFilter=` lines in order (the first an allow list, `~` lines
    /// take away, later plain lines give back), groups expanded with `systemd-analyze syscall-filter`.
    static func allowedSystemCalls(analyze: String) throws -> Set<String> {
        var groups: [String: [String]] = [:]
        var current: String?
        for line in try run(analyze, ["syscall-filter", "--no-pager"]).output.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("@") {
                current = String(line)
                groups[String(line), default: []] = []
            } else if line.hasPrefix("#") || line.isEmpty {
                if !line.hasPrefix("#") { current = nil }
            } else if let group = current {
                let name = line.trimmingCharacters(in: .whitespaces)
                if !name.hasPrefix("#") { groups[group, default: []].append(name) }
            }
        }
        func expand(_ item: String) -> Set<String> {
            guard item.hasPrefix("@") else { return [item] }
            return (groups[item] ?? []).reduce(into: Set<String>()) { $0.formUnion(expand($1)) }
        }
        var allowed: Set<String> = []
        let unit = try String(contentsOfFile: unit, encoding: .utf8)
        for line in unit.split(separator: "\n") where line.hasPrefix("SystemCallFilter=") {
            var value = line.dropFirst("SystemCallFilter=".count)
            let remove = value.hasPrefix("~")
            if remove { value = value.dropFirst() }
            let items = value.split(separator: " ").reduce(into: Set<String>()) { $0.formUnion(expand(String($1))) }
            if remove { allowed.subtract(items) } else { allowed.formUnion(items) }
        }
        return allowed
    }

    @Test func afmdWorksUnderTheUnitsSystemCallFilter() throws {
        let analyze = try #require(["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) },
            "systemd-analyze is missing: install the Debian package systemd (scripts/bootstrap)")
        let libseccomp = try #require(
            ["/usr/lib/x86_64-linux-gnu/libseccomp.so.2", "/usr/lib/aarch64-linux-gnu/libseccomp.so.2", "/lib/x86_64-linux-gnu/libseccomp.so.2"]
                .first { FileManager.default.fileExists(atPath: $0) }, "libseccomp.so.2 is missing (Debian package libseccomp2)")
        let scratch = TestPaths.makeTemporaryDirectory("afm-seccomp")
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        try Self.filterSource.write(toFile: scratch + "/filter.c", atomically: true, encoding: .utf8)
        let compiled = try Self.run("/usr/bin/env", ["cc", "-O1", "-o", scratch + "/filter", scratch + "/filter.c", libseccomp])
        try #require(compiled.status == 0, "\(compiled.output)")
        let allowed = try Self.allowedSystemCalls(analyze: analyze)
        #expect(allowed.contains("socketpair") && allowed.contains("chown") && !allowed.contains("setresuid") && !allowed.contains("process_vm_readv"))
        try allowed.sorted().joined(separator: "\n").write(toFile: scratch + "/allowed", atomically: true, encoding: .utf8)
        // The filter is real: a call outside it fails with EPERM.
        let refused = try Self.run(scratch + "/filter", [scratch + "/allowed", "/usr/bin/setpriv", "--reuid=65534", "/bin/true"])
        #expect(refused.status != 0 && refused.output.contains("not permitted"), "\(refused.output)")

        // The upstream: a plain afmd with the scripted backend.
        let upstreamBackends = BackendDirectoryBuilder()
        try upstreamBackends.addScripted()
        let upstream = try DaemonProcess(backendDirectory: upstreamBackends.path)
        defer { upstream.stop() }

        let backends = BackendDirectoryBuilder()
        try backends.addCFixture(hosting: "runner")
        try FileManager.default.copyItem(atPath: TestPaths.binDirectory + "/libafm-backend-private-cloud.so", toPath: backends.path + "/private-cloud.so")
        try FileManager.default.copyItem(atPath: TestPaths.root + "/Plugins/private-cloud/private-cloud.json", toPath: backends.path + "/private-cloud.json")
        let root = scratch + "/root"
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        let group: UInt32 = 4248
        try """
            [Admin]
            SocketGroup=\(group)
            [Backend.private-cloud]
            Upstreams=http://127.0.0.1:\(upstream.port)/v1
            Model=scripted-demo
            APIKeyEnv=AFM_TEST_KEY

            """.write(toFile: root + "/afmd.conf", atomically: true, encoding: .utf8)
        let log = root + "/afmd.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: scratch + "/filter")
        daemon.arguments = [scratch + "/allowed", TestPaths.afmd, "--listen", "127.0.0.1:0", "--config-root", root, "--backend-dir", backends.path]
        daemon.environment = ProcessInfo.processInfo.environment.merging(["AFM_TEST_KEY": "test"]) { $1 }
        daemon.standardError = FileHandle(forWritingAtPath: log)
        daemon.standardOutput = FileHandle.nullDevice
        try daemon.run()
        defer {
            if daemon.isRunning { kill(daemon.processIdentifier, SIGTERM) }
            daemon.waitUntilExit()
        }
        func logText() -> String { (try? String(contentsOfFile: log, encoding: .utf8)) ?? "" }
        #expect(waitUntil(seconds: 30) { logText().contains("admin socket ready") || !daemon.isRunning }, "\(logText())")
        let text = logText()
        let range = try #require(text.range(of: "listening on 127.0.0.1:"), "\(text)")
        let port = try #require(Int(text[range.upperBound...].prefix { $0.isNumber }))
        #expect(readProcFile("/proc/\(daemon.processIdentifier)/status").contains("Seccomp:\t2"))

        // A backend in a runner.
        #expect(try TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "c-echo")).status == 200)
        // The private cloud: libcurl to the upstream afmd.
        let cloud = try TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "private-cloud", stream: true))
        #expect(cloud.events.last?.event == "response.completed", "\(cloud)\n\(logText())")
        // A reload starts a new runner.
        let socket = root + "/run/afm/admin.sock"
        let reload = try Self.run(TestPaths.binDirectory + "/afmctl", ["--socket", socket, "reload", "c-fixture", "--wait"])
        #expect(reload.status == 0, "\(reload.output)")
        #expect(try TestHTTPClient(port: port).post("/v1/responses", json: responsesBody(model: "c-echo")).status == 200)
        // chown gave the socket its group.
        let attributes = try FileManager.default.attributesOfItem(atPath: socket)
        #expect((attributes[.groupOwnerAccountID] as? NSNumber)?.uint32Value == group)
        #expect(!logText().contains(" error ") && !logText().contains("undumpable"), "\(logText())")
    }
}
