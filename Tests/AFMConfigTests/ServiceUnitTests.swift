// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Testing

/// The shipped systemd unit (`share/systemd/afmd.service`): `systemd-analyze verify` accepts it without a word,
/// and its `systemd-analyze security` exposure is at most the value recorded in `share/debian/README`, so a
/// hardening line cannot be dropped unnoticed. systemd-analyze comes with the Debian package systemd
/// (scripts/bootstrap installs it); without it these tests fail.
@Suite struct ServiceUnitTests {
    static let unit = TestPaths.root + "/share/systemd/afmd.service"
    static let readme = TestPaths.root + "/share/debian/README"
    static let marker = "ServiceUnitTests fails above this"

    static var systemdAnalyze: String? {
        ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Runs a command; returns its status and its standard output and error together.
    static func run(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try CommandOutput.run(
            executable, arguments, environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "SYSTEMD_COLORS": "0", "SYSTEMD_PAGER": ""])
        return (result.status, result.output)
    }

    /// `systemctl reload` must not share the admin socket's per-user cap with the backend runners (user `_afmd`,
    /// which a compromised one could fill): its afmctl runs as root ("+"), which has reserved slots of its own.
    @Test func reloadRunsAfmctlAsRoot() throws {
        let text = try String(contentsOfFile: Self.unit, encoding: .utf8)
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("ExecReload=") }
        #expect(lines == ["ExecReload=+/usr/bin/afmctl reload --wait"], "\(lines)")
    }

    @Test func systemdAnalyzeVerifiesTheUnitCleanly() throws {
        let analyze = try #require(Self.systemdAnalyze, "systemd-analyze is missing: install the Debian package systemd (scripts/bootstrap)")
        // A root with the host's units (for the dependencies: sysinit.target, …), the unit, and stand-ins for the
        // programs it runs, which verify checks for.
        let root = TestPaths.makeTemporaryDirectory("afm-unit-root")
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/usr/lib/systemd", withIntermediateDirectories: true)
        #expect(try Self.run("/bin/cp", ["-a", "/usr/lib/systemd/system", root + "/usr/lib/systemd/system"]).status == 0)
        try FileManager.default.createSymbolicLink(atPath: root + "/lib", withDestinationPath: "usr/lib")
        try? FileManager.default.removeItem(atPath: root + "/usr/lib/systemd/system/afmd.service")
        try FileManager.default.copyItem(atPath: Self.unit, toPath: root + "/usr/lib/systemd/system/afmd.service")
        for program in ["/usr/sbin/afmd", "/usr/bin/afmctl"] {
            try FileManager.default.createDirectory(atPath: root + (program as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try "#!/bin/sh\n".write(toFile: root + program, atomically: true, encoding: .utf8)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: root + program)
        }
        let result = try Self.run(analyze, ["verify", "--man=no", "--root=" + root, "/usr/lib/systemd/system/afmd.service"])
        #expect(result.status == 0, "\(result.output)")
        // verify exits 0 even for lines it ignores (an unknown system call, a bad value): any word is a failure.
        #expect(!result.output.contains("afmd.service"), "\(result.output)")
    }

    @Test func exposureIsAtMostTheRecordedValue() throws {
        let analyze = try #require(Self.systemdAnalyze, "systemd-analyze is missing: install the Debian package systemd (scripts/bootstrap)")
        let readme = try String(contentsOfFile: Self.readme, encoding: .utf8)
        let line = try #require(readme.split(separator: "\n").first { $0.contains(Self.marker) }, "share/debian/README records no exposure")
        let recorded = try #require(Self.firstNumber(in: line.split(separator: "|").last.map(String.init) ?? ""))
        let result = try Self.run(analyze, ["security", "--offline=yes", "--no-pager", Self.unit])
        let overall = try #require(
            result.output.split(separator: "\n").first { $0.contains("Overall exposure level") }, "\(result.output)")
        // "→ Overall exposure level for afmd.service: 1.6 OK 🙂" (the emoji is ":-)" without a UTF-8 locale).
        let value = try #require(overall.range(of: ".service:").map { String(overall[$0.upperBound...]) }, "\(overall)")
        let exposure = try #require(Self.firstNumber(in: value), "\(overall)")
        #expect(exposure <= recorded, "afmd.service exposure \(exposure) is above the recorded \(recorded):\n\(result.output)")
    }

    /// The first decimal number in `text` ("2.0 OK" → 2.0).
    static func firstNumber(in text: String) -> Double? {
        let digits = text.drop { !$0.isNumber }.prefix { $0.isNumber || $0 == "." }
        return Double(digits)
    }
}
