// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A tmux command that could not run.
public struct TmuxFailure: Error {
    public var message: String

    public init(message: String) { self.message = message }
}

/// A tmux server of its own (its own socket), with one pane running a command in a pseudo-terminal.
public final class TmuxPane {
    public let socket: String
    public let session = "chat"

    public init(command: [String], width: Int = 160, height: Int = 50) throws {
        socket = "afm-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        let quoted = command.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        // The scrollback limit applies to panes created after it is set, so it is set before the session.
        try tmux([
            "start-server", ";", "set-option", "-g", "history-limit", "50000", ";",
            "new-session", "-d", "-s", session, "-x", "\(width)", "-y", "\(height)", "env TERM=xterm-256color " + quoted + "; sleep 30",
        ])
        serverPID = Int32((try? tmux(["display-message", "-p", "-t", session, "#{pid}"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "")
    }

    private var serverPID: Int32?

    deinit {
        _ = try? tmux(["kill-server"])
        if let serverPID, serverPID > 0 { kill(serverPID, SIGKILL) }
    }

    /// Runs `tmux -L SOCKET ARGS` and returns its standard output.
    ///
    /// Spawned with posix_spawn and reaped with waitpid rather than Foundation's Process: the tmux server that
    /// new-session forks keeps the client's descriptors and process group, which stalls Process's
    /// termination monitoring. Output goes to a file, never a pipe the daemonized server would hold open.
    @discardableResult
    public func tmux(_ arguments: [String]) throws -> String {
        let outputPath = NSTemporaryDirectory() + "\(socket)-\(UUID().uuidString.prefix(6)).out"
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        let argv = ["tmux", "-L", socket] + arguments
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { for pointer in cArguments { free(pointer) } }
        var pid: pid_t = 0
        let status = posix_spawnp(&pid, "tmux", &actions, nil, &cArguments, environ)
        guard status == 0 else { throw TmuxFailure(message: "posix_spawnp tmux: \(status)") }
        var exitStatus: Int32 = 0
        while waitpid(pid, &exitStatus, 0) < 0 && errno == EINTR {}
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }

    /// Types text literally (no Enter).
    public func type(_ text: String) throws { try tmux(["send-keys", "-t", session, "-l", text]) }

    /// Presses keys by tmux name (`Enter`, `C-c`).
    public func press(_ keys: String...) throws { try tmux(["send-keys", "-t", session] + keys) }

    /// Types a line and presses Enter.
    public func line(_ text: String) throws {
        try type(text)
        try press("Enter")
    }

    /// The whole pane with its history, lines joined.
    public func screen() -> String { (try? tmux(["capture-pane", "-p", "-J", "-S", "-", "-t", session])) ?? "" }

    /// The visible pane as the terminal shows it: lines as drawn (not joined), with its SGR styling as escapes.
    public func styledScreen() -> String { (try? tmux(["capture-pane", "-p", "-e", "-t", session])) ?? "" }

    /// The visible pane, lines as drawn (not joined).
    public func visibleLines() -> [String] {
        ((try? tmux(["capture-pane", "-p", "-t", session])) ?? "").components(separatedBy: "\n")
    }

    /// Changes the pane's size (the program gets SIGWINCH).
    public func resize(width: Int, height: Int = 50) throws {
        try tmux(["resize-window", "-t", session, "-x", "\(width)", "-y", "\(height)"])
    }

    /// Waits until the screen contains `text` `count` times; returns whether it did.
    @discardableResult
    public func waitFor(_ text: String, count: Int = 1, seconds: Double = 15) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if screen().components(separatedBy: text).count - 1 >= count { return true }
            usleep(50_000)
        }
        return false
    }

    /// The pid of the process in the pane.
    public func panePID() -> Int32? { Int32((try? tmux(["display-message", "-p", "-t", session, "#{pane_pid}"]))?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "") }
}
