// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// The parsed command line of `afmctl`.
struct CtlOptions {
    /// A usage error: one `Error:` line, exit 64.
    struct UsageError: Error {
        var message: String
    }

    enum Command: Equatable {
        case status
        case top(intervalMilliseconds: Int)
        case backends
        case reload(backend: String?, wait: Bool)
        case listener(start: Bool)
        case drain
        case promptGet
        case promptSet(text: String?, file: String?, ifRevision: Int?)
        case configShow(origin: Bool, key: String?)
        case settingsSet(key: String, value: String)
        case help(String?)
        case version
    }

    var socket: String?
    var json = false
    var command: Command = .help(nil)

    init(arguments: [String]) throws(UsageError) {
        var positional: [String] = []
        var flags: [String: String] = [:]
        var switches: Set<String> = []
        var index = 0
        let valued: Set<String> = ["--socket", "--interval", "--if-revision", "-f"]
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if argument == "--" {
                positional += arguments[index...]
                break
            }
            if argument.hasPrefix("-") && argument != "-" {
                let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
                let name = parts[0]
                if valued.contains(name) {
                    if parts.count == 2 {
                        flags[name] = parts[1]
                    } else {
                        guard index < arguments.count else { throw UsageError(message: "\(name) needs a value") }
                        flags[name] = arguments[index]
                        index += 1
                    }
                } else if ["--json", "--wait", "--origin", "--help", "-h", "--version"].contains(name), parts.count == 1 {
                    switches.insert(name)
                } else {
                    throw UsageError(message: "unknown option '\(argument)'")
                }
            } else {
                positional.append(argument)
            }
        }
        socket = flags["--socket"]
        json = switches.contains("--json")
        if switches.contains("--version") {
            command = .version
            return
        }
        guard let name = positional.first else {
            command = .help(nil)
            return
        }
        if switches.contains("--help") || switches.contains("-h") {
            guard CtlHelp.commands[name] != nil || name == "help" else { throw UsageError(message: "unknown command '\(name)'") }
            command = .help(name == "help" ? nil : name)
            return
        }
        let rest = Array(positional.dropFirst())
        func expect(_ count: ClosedRange<Int>) throws(UsageError) {
            guard count.contains(rest.count) else {
                throw UsageError(message: "wrong number of arguments for '\(name)' (see afmctl \(name) --help)")
            }
        }
        func allow(_ allowed: Set<String>) throws(UsageError) {
            let given = Set(flags.keys).subtracting(["--socket"]).union(switches.subtracting(["--json"]))
            if let extra = given.subtracting(allowed).sorted().first {
                throw UsageError(message: "'\(extra)' does not apply to '\(name)' (see afmctl \(name) --help)")
            }
        }
        switch name {
        case "help":
            try expect(0...1)
            if let topic = rest.first, CtlHelp.commands[topic] == nil { throw UsageError(message: "unknown command '\(topic)'") }
            command = .help(rest.first)
        case "status":
            try expect(0...0)
            try allow([])
            command = .status
        case "top":
            try expect(0...0)
            try allow(["--interval"])
            let interval = flags["--interval"].map { Int($0) } ?? 1000
            guard let interval, (50...3_600_000).contains(interval) else {
                throw UsageError(message: "--interval must be milliseconds between 50 and 3600000")
            }
            command = .top(intervalMilliseconds: interval)
        case "backends":
            try expect(0...0)
            try allow([])
            command = .backends
        case "reload":
            try expect(0...1)
            try allow(["--wait"])
            command = .reload(backend: rest.first, wait: switches.contains("--wait"))
        case "listener":
            try expect(1...1)
            try allow([])
            guard rest[0] == "start" || rest[0] == "stop" else {
                throw UsageError(message: "listener takes 'start' or 'stop', not '\(rest[0])'")
            }
            command = .listener(start: rest[0] == "start")
        case "drain":
            try expect(0...0)
            try allow([])
            command = .drain
        case "prompt":
            guard let verb = rest.first else { throw UsageError(message: "prompt takes 'get' or 'set' (see afmctl prompt --help)") }
            switch verb {
            case "get":
                try expect(1...1)
                try allow([])
                command = .promptGet
            case "set":
                try allow(["-f", "--if-revision"])
                let file = flags["-f"]
                guard (file == nil) == (rest.count == 2), rest.count <= 2 else {
                    throw UsageError(message: "prompt set takes TEXT or -f FILE (see afmctl prompt --help)")
                }
                var revision: Int?
                if let text = flags["--if-revision"] {
                    guard let number = Int(text), number >= 0 else { throw UsageError(message: "--if-revision needs a number") }
                    revision = number
                }
                command = .promptSet(text: rest.count == 2 ? rest[1] : nil, file: file, ifRevision: revision)
            default:
                throw UsageError(message: "prompt takes 'get' or 'set', not '\(verb)'")
            }
        case "config":
            guard rest.first == "show" else { throw UsageError(message: "config takes 'show' (see afmctl config --help)") }
            try expect(1...2)
            try allow(["--origin"])
            command = .configShow(origin: switches.contains("--origin"), key: rest.count == 2 ? rest[1] : nil)
        case "settings":
            guard rest.first == "set" else { throw UsageError(message: "settings takes 'set' (see afmctl settings --help)") }
            try expect(3...3)
            try allow([])
            command = .settingsSet(key: rest[1], value: rest[2])
        default:
            throw UsageError(message: "unknown command '\(name)' (see afmctl --help)")
        }
    }

    /// Whether the command talks to the daemon (help and version do not, so they never need a socket).
    var needsSocket: Bool {
        switch command {
        case .help, .version: false
        default: true
        }
    }

    /// The socket to use: `$AFM_ADMIN_SOCKET`; `$RUNTIME_DIRECTORY/admin.sock` inside afmd's systemd service when
    /// that directory is called `afm` (`RuntimeDirectory=afm`: a process of the service user, where the next two
    /// would be wrong); `/run/afm/admin.sock` as root; else the user's runtime dir (`--socket` wins over all of
    /// them, in main). A `RUNTIME_DIRECTORY` of another name belongs to another unit that happens to run afmctl
    /// (`RuntimeDirectory=foo`) and is ignored: its socket is not afmd's.
    ///
    /// Without `XDG_RUNTIME_DIR` that is `/tmp/afm-UID/admin.sock`, like afmd's; the directory (and an
    /// `$XDG_RUNTIME_DIR/afm` whose parent every user may write to) is world-writable territory, so it is created `0700` when missing and refused unless it is ours with mode `0700` (another user's
    /// directory could hold a fake socket that collects our calls).
    /// - Throws: ``PrivateDirectoryError`` naming the directory, its owner and its mode.
    static func defaultSocket(environment: [String: String]) throws(PrivateDirectoryError) -> String {
        if let path = environment["AFM_ADMIN_SOCKET"], !path.isEmpty { return path }
        let standard = try standardSocket(environment: environment)
        if FileManager.default.fileExists(atPath: standard) { return standard }
        return checkoutSocket(from: FileManager.default.currentDirectoryPath) ?? standard
    }

    /// The admin socket of a `make run` daemon (`--config-root .build/afm/root`) in the checkout that holds
    /// `directory`, when one is there: afmctl run from a checkout finds the daemon `make run` started without flags.
    ///
    /// The walk up can reach directories other users write to (`/tmp`): a candidate counts only when its
    /// `.build/…/admin.sock` chain is ours alone (``PrivateDirectory/isOwned(base:components:owner:)``), so
    /// another user cannot plant a socket that collects our calls.
    static func checkoutSocket(from directory: String) -> String? {
        let components = [".build", "afm", "root", "run", "afm", "admin.sock"]
        let owner = UserDatabase.effectiveUserID
        var current = directory
        while !current.isEmpty {
            let candidate = current + "/.build/afm/root/run/afm/admin.sock"
            if FileManager.default.fileExists(atPath: candidate) {
                if PrivateDirectory.isOwned(base: current, components: components, owner: owner) { return candidate }
                return nil
            }
            guard current != "/" else { break }
            current = (current as NSString).deletingLastPathComponent
        }
        return nil
    }

    private static func standardSocket(environment: [String: String]) throws(PrivateDirectoryError) -> String {
        // systemd passes a colon-separated list when a unit has several runtime directories; afmd uses the first.
        if let list = environment["RUNTIME_DIRECTORY"], let first = list.split(separator: ":").first,
            first.split(separator: "/").last == "afm"
        {
            return first + "/admin.sock"
        }
        let uid = UserDatabase.effectiveUserID
        if uid == 0 { return "/run/afm/admin.sock" }
        if let runtime = environment["XDG_RUNTIME_DIR"], !runtime.isEmpty {
            // XDG_RUNTIME_DIR=/tmp: another user may have made /tmp/afm, like /tmp/afm-UID below.
            let directory = runtime + "/afm"
            if PrivateDirectory.parentIsWritableByOthers(directory) { try PrivateDirectory.prepare(directory, owner: uid) }
            return directory + "/admin.sock"
        }
        let directory = PrivateDirectory.sharedRuntimeDirectory(uid: uid)
        try PrivateDirectory.prepare(directory, owner: uid)
        return directory + "/admin.sock"
    }
}
