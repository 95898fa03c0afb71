// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

extension ChildProcess {
    /// The parent's ends of a child's standard streams (see ``spawn(command:arguments:environment:directory:)``).
    ///
    /// All three are close-on-exec and blocking; the owner closes them.
    public struct StandardStreams: Sendable {
        /// Write end of the child's standard input; closing it is the child's end of input.
        public let input: FileDescriptor
        /// Read end of the child's standard output.
        public let output: FileDescriptor
        /// Read end of the child's standard error.
        public let error: FileDescriptor
    }

    /// Spawns a tool server (an MCP server, for instance) with pipes on its standard streams.
    ///
    /// The child gets descriptors 0–2 (the pipes) and nothing else (`closefrom(3)`), an empty signal mask with
    /// default dispositions, and its own process group, so a terminal's Ctrl-C reaches the parent alone, which then
    /// stops its children in order. A `command` without a slash is looked up in the parent's `PATH`
    /// (`posix_spawnp`).
    ///
    /// - Parameters:
    ///   - environment: the child's whole environment ("KEY=value").
    ///   - directory: the child's working directory, or nil for the parent's.
    /// - Throws: `SystemCallError` from `pipe2` or `posix_spawnp` (e.g. `ENOENT` for a missing command).
    ///   The corresponding C functions are `pipe2`, `posix_spawnp` and `posix_spawn_file_actions_addchdir_np`.
    public static func spawn(
        command: String, arguments: [String], environment: [String], directory: String?
    ) throws(SystemCallError) -> (process: ChildProcess, streams: StandardStreams) {
        var pipes: [(read: Int32, write: Int32)] = []
        defer {
            // The child's ends are closed in the parent in every case; the parent's ends only on failure (below).
            for (index, pipe) in pipes.enumerated() { Glibc.close(index == 0 ? pipe.read : pipe.write) }
        }
        for _ in 0..<3 {
            var ends: [Int32] = [-1, -1]
            // Close-on-exec from the start: another thread's spawn must not inherit the parent's ends.
            guard LinuxSymbols.pipe2(&ends, O_CLOEXEC) == 0 else {
                let failure = SystemCallError(call: "pipe2", errno: Errno.current)
                for (index, pipe) in pipes.enumerated() { Glibc.close(index == 0 ? pipe.write : pipe.read) }
                throw failure
            }
            pipes.append((ends[0], ends[1]))
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 onto 0–2 clears close-on-exec on the copies; the originals (≥ 3) are closed by closefrom.
        posix_spawn_file_actions_adddup2(&actions, pipes[0].read, 0)
        posix_spawn_file_actions_adddup2(&actions, pipes[1].write, 1)
        posix_spawn_file_actions_adddup2(&actions, pipes[2].write, 2)
        _ = SpawnSymbols.addCloseFrom(&actions, 3)
        if let directory { _ = SpawnSymbols.addChdir(&actions, directory) }

        let process: ChildProcess
        do {
            process = try launch(command, arguments: arguments, environment: environment, actions: &actions, searchingPath: true)
        } catch {
            for (index, pipe) in pipes.enumerated() { Glibc.close(index == 0 ? pipe.write : pipe.read) }
            throw error
        }
        let streams = StandardStreams(
            input: FileDescriptor(rawValue: pipes[0].write), output: FileDescriptor(rawValue: pipes[1].read),
            error: FileDescriptor(rawValue: pipes[2].read))
        return (process, streams)
    }

    /// Reaps the child if it has ended, without waiting; nil while it runs (or when it is not this process's
    /// child). The corresponding C function is `waitpid` with `WNOHANG`.
    public func reapIfExited() -> ChildExitStatus? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { return ChildExitStatus(waitStatus: status) }
            if result < 0 && errno == EINTR { continue }
            return nil
        }
    }
}
