// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation
import Testing

/// Golden tests of the built `afmctl`: help text, usage errors and exit codes.
///
/// Serialized, and each child runs from its own thread: waiting for children on the cooperative pool (two
/// threads on a two-core machine) starved the admin-socket tests running in parallel.
@Suite(.serialized) struct AfmctlTests {
    struct Result {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    static func afmctl(_ arguments: [String], environment: [String: String] = [:]) async throws -> Result {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Swift.Result { try afmctlBlocking(arguments, environment: environment) }) }.start()
        }
    }

    static func afmctlBlocking(_ arguments: [String], environment: [String: String]) throws -> Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestPaths.binDirectory + "/afmctl")
        process.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env.removeValue(forKey: "AFM_ADMIN_SOCKET")
        env.merge(environment) { $1 }
        process.environment = env
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        let stdout = out.fileHandleForReading.readDataToEndOfFile()
        let stderr = err.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Result(
            status: process.terminationStatus, stdout: String(decoding: stdout, as: UTF8.self),
            stderr: String(decoding: stderr, as: UTF8.self))
    }

    static let goldenHelp = """
        Usage: afmctl [--socket PATH] [--json] COMMAND [ARGS]

        Control a running afmd over its admin socket (varlink, interface org.afm.Admin).

        Commands:
          status                         Version, listener, backends, bind failures, counters
          top                            Live token monitor (Ctrl-C exits)
          backends                       Backends with state, generation and reason
          reload [BACKEND] [--wait]      Reload the configuration and backends, or one backend   (operator)
          listener start|stop            Start or stop the HTTP listener                         (operator)
          drain                          Fail /ready, then close the listener after the delay    (operator)
          prompt get                     Print the common prompt
          prompt set TEXT|-f FILE        Replace the common prompt ('-f -' reads stdin)          (admin)
          config show [--origin] [KEY]   Effective configuration, optionally with origins
          settings set KEY VALUE         Save a setting: host, port, listen, privateCloudPreference,
                                         commonPrompt                                            (admin)
          help [COMMAND]                 Help for one command

        Options:
          --socket PATH   Admin socket (default: $AFM_ADMIN_SOCKET, else /run/afm/admin.sock as root,
                          else $XDG_RUNTIME_DIR/afm/admin.sock; when that is missing, a `make run`
                          daemon's .build/afm/root/run/afm/admin.sock in the checkout around you)
          --json          Print the daemon's reply as JSON instead of text
          --version       Print the version, then exit
          -h, --help      Print this help, then exit

        Exit status: 0 success, 64 usage error, 65 invalid value, 66 cannot read the input file,
        69 cannot connect, 70 failure, 74 saved and in force but not flushed to disk, 75 timeout,
        77 permission denied.

        """

    @Test(arguments: [["--help"], ["-h"], ["help"], []])
    func mainHelp(arguments: [String]) async throws {
        let result = try await Self.afmctl(arguments)
        #expect(result.status == 0)
        #expect(result.stdout == Self.goldenHelp)
        #expect(result.stderr.isEmpty)
    }

    @Test(arguments: ["status", "top", "backends", "reload", "listener", "drain", "prompt", "config", "settings"])
    func commandHelp(command: String) async throws {
        let viaFlag = try await Self.afmctl([command, "--help"])
        let viaHelp = try await Self.afmctl(["help", command])
        #expect(viaFlag.status == 0)
        #expect(viaFlag.stdout == viaHelp.stdout)
        #expect(viaFlag.stdout.hasPrefix("Usage: afmctl \(command)"))
    }

    @Test func reloadHelpIsGolden() async throws {
        #expect(try await Self.afmctl(["reload", "--help"]).stdout == """
            Usage: afmctl reload [BACKEND] [--wait]

            Reload the configuration and every backend whose configuration, model file or library changed, or
            only BACKEND. The reply comes when the new generation serves; on failure the old generation keeps
            serving and the reason is printed. Progress goes to stderr. --wait waits without a time limit
            (for ExecReload=). Level: operator.

            """)
    }

    @Test func version() async throws {
        let result = try await Self.afmctl(["--version"])
        #expect(result.status == 0)
        #expect(result.stdout.hasPrefix("afmctl "))
    }

    @Test(arguments: [
        (["frobnicate"], "Error: unknown command 'frobnicate' (see afmctl --help)"),
        (["--bogus", "status"], "Error: unknown option '--bogus'"),
        (["status", "extra"], "Error: wrong number of arguments for 'status' (see afmctl status --help)"),
        (["listener", "pause"], "Error: listener takes 'start' or 'stop', not 'pause'"),
        (["listener"], "Error: wrong number of arguments for 'listener' (see afmctl listener --help)"),
        (["prompt"], "Error: prompt takes 'get' or 'set' (see afmctl prompt --help)"),
        (["prompt", "set"], "Error: prompt set takes TEXT or -f FILE (see afmctl prompt --help)"),
        (["prompt", "set", "x", "-f", "y"], "Error: prompt set takes TEXT or -f FILE (see afmctl prompt --help)"),
        (["settings", "set", "port"], "Error: wrong number of arguments for 'settings' (see afmctl settings --help)"),
        (["config", "dump"], "Error: config takes 'show' (see afmctl config --help)"),
        (["status", "--origin"], "Error: '--origin' does not apply to 'status' (see afmctl status --help)"),
        (["top", "--interval", "5"], "Error: --interval must be milliseconds between 50 and 3600000"),
        (["--socket"], "Error: --socket needs a value"),
    ])
    func usageErrorsExit64(arguments: [String], message: String) async throws {
        let result = try await Self.afmctl(arguments)
        #expect(result.status == 64)
        #expect(result.stdout.isEmpty)
        #expect(result.stderr == message + "\nUsage: afmctl [--socket PATH] [--json] COMMAND (see afmctl --help)\n")
    }

    @Test(arguments: [["status"], ["reload", "--wait"], ["top"], ["config", "show", "--origin"]])
    func cannotConnectExits69NamingTheSocket(arguments: [String]) async throws {
        let socket = NSTemporaryDirectory() + "afmctl-missing-\(getpid())/admin.sock"
        let result = try await Self.afmctl(["--socket", socket] + arguments)
        #expect(result.status == 69)
        #expect(result.stderr.hasPrefix("Error: cannot connect to the admin socket \(socket): no such socket"))
    }

    @Test func environmentChoosesTheSocket() async throws {
        let socket = "/nonexistent/afm-env.sock"
        let result = try await Self.afmctl(["status"], environment: ["AFM_ADMIN_SOCKET": socket])
        #expect(result.status == 69)
        #expect(result.stderr.contains(socket))
    }

    /// `prompt set -f` reads the file before connecting: a missing file is named with the errno text (exit 66,
    /// EX_NOINPUT), not reported as a protocol error.
    @Test func promptSetFromAMissingFileNamesTheFileAndTheErrno() async throws {
        let socket = NSTemporaryDirectory() + "afmctl-missing-\(getpid())/admin.sock"
        let missing = NSTemporaryDirectory() + "afmctl-no-such-prompt-\(getpid()).txt"
        let result = try await Self.afmctl(["--socket", socket, "prompt", "set", "-f", missing])
        #expect(result.status == 66)
        #expect(result.stderr == "Error: cannot read the prompt from \(missing): `open`: No such file or directory (errno 2)\n")
    }

    /// A prompt file that is not UTF-8 is refused (exit 65, EX_DATAERR) before anything is sent, never sent with
    /// replacement characters.
    @Test func promptSetRefusesInvalidUTF8() async throws {
        let socket = NSTemporaryDirectory() + "afmctl-missing-\(getpid())/admin.sock"
        let file = TestPaths.makeTemporaryDirectory("afmctl-prompt") + "/prompt.txt"
        #expect(FileManager.default.createFile(atPath: file, contents: Data(Array("Be nice ".utf8) + [0xFF, 0x41])))
        let result = try await Self.afmctl(["--socket", socket, "prompt", "set", "-f", file])
        #expect(result.status == 65)
        #expect(result.stderr == "Error: the prompt in \(file) is not valid UTF-8 (first bad byte at offset 8); nothing was changed\n")
    }
}
