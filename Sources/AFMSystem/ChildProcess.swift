// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// A child process started with `posix_spawn` and an explicit descriptor layout (a backend runner).
///
/// The child gets exactly these descriptors, whatever the parent has open:
///
/// ```
///  0  /dev/null (read)         1  /dev/null (write)        2  the parent's standard error (its log)
///  3  the channel (one end of a socketpair)               ≥4  closed (closefrom), even without close-on-exec
/// ```
///
/// Signals are reset for the child: an empty signal mask and default dispositions, so a parent that blocks
/// `SIGTERM` to watch it with `signalfd` still has children that die on `SIGTERM`. The child runs in its own
/// process group, so a terminal's Ctrl-C reaches the parent, which then stops its children in order.
///
/// A `ChildProcess` is a plain value: exactly one owner calls ``wait()`` (which reaps the process).
public struct ChildProcess: Sendable, Hashable {
    /// The child's process id.
    public let pid: Int32

    /// The descriptor number the channel has in the child.
    public static let channelDescriptor: Int32 = 3

    /// Spawns `path` with `arguments` (without argv[0], which is `path`) and exactly `environment` ("KEY=value").
    ///
    /// - Parameter channel: a descriptor of the parent that becomes descriptor 3 in the child. The parent keeps
    ///   its own copy and should close it once the child started.
    /// - Throws: `SystemCallError` for `posix_spawn` (e.g. `ENOENT` for a missing executable).
    ///   The corresponding C functions are `posix_spawn`, `posix_spawn_file_actions_adddup2`,
    ///   `posix_spawn_file_actions_addclosefrom_np` and `posix_spawnattr_setsigdefault`.
    public static func spawn(
        path: String, arguments: [String], environment: [String], channel: FileDescriptor
    ) throws(SystemCallError) -> ChildProcess {
        // dup2(3, 3) would keep close-on-exec set; move the channel off 3 first.
        var source = channel.rawValue
        var temporary: Int32 = -1
        if source <= Self.channelDescriptor {
            temporary = try blockingSystemCall("fcntl") { fcntl(channel.rawValue, F_DUPFD_CLOEXEC, 10) }
            source = temporary
        }
        defer { if temporary >= 0 { Glibc.close(temporary) } }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, source, Self.channelDescriptor)
        _ = SpawnSymbols.addCloseFrom(&actions, Self.channelDescriptor + 1)

        return try launch(path, arguments: arguments, environment: environment, actions: &actions, searchingPath: false)
    }

    /// Runs `posix_spawn` (with `searchingPath`, `posix_spawnp`: a `path` without a slash is looked up in `PATH`)
    /// with `actions` and the attributes every child gets: an empty signal mask, default dispositions for signals
    /// 1–31 but `SIGKILL` and `SIGSTOP`, and its own process group.
    static func launch(
        _ path: String, arguments: [String], environment: [String], actions: inout posix_spawn_file_actions_t,
        searchingPath: Bool
    ) throws(SystemCallError) -> ChildProcess {
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t()
        sigemptyset(&empty)
        var all = sigset_t()
        sigemptyset(&all)
        for number in 1..<32 where number != SIGKILL && number != SIGSTOP { sigaddset(&all, Int32(number)) }
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        let flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETPGROUP)
        posix_spawnattr_setflags(&attributes, Int16(flags))

        var pid: pid_t = 0
        let result = withCStringArray([path] + arguments) { argv in
            withCStringArray(environment) { envp in
                searchingPath
                    ? posix_spawnp(&pid, path, &actions, &attributes, argv, envp)
                    : posix_spawn(&pid, path, &actions, &attributes, argv, envp)
            }
        }
        guard result == 0 else {
            throw SystemCallError(call: searchingPath ? "posix_spawnp" : "posix_spawn", errno: Errno(rawValue: result))
        }
        return ChildProcess(pid: pid)
    }

    /// Sends `signal` to the child. Errors (the child is already reaped) are ignored.
    /// The corresponding C function is `kill`.
    public func send(signal: Int32) {
        _ = Glibc.kill(pid, signal)
    }

    /// Asks the child to stop with `SIGTERM`. The corresponding C function is `kill`.
    public func terminate() {
        send(signal: SIGTERM)
    }

    /// Ends the child with `SIGKILL` (it cannot be caught or ignored). The corresponding C function is `kill`.
    public func killImmediately() {
        send(signal: SIGKILL)
    }

    /// Waits until the child has ended, **without** reaping it: the pid stays reserved (a zombie) so the caller
    /// can settle its bookkeeping before ``wait()`` frees it. Blocks: call it on a dedicated thread.
    /// The corresponding C function is `waitid` with `WNOWAIT`.
    public func waitUntilExited() {
        var info = siginfo_t()
        while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
    }

    /// Waits until the child ends and reaps it. Blocks: call it on a dedicated thread.
    ///
    /// Returns nil when the process is not (or no longer) this process's child (`ECHILD`).
    /// The corresponding C function is `waitpid`.
    public func wait() -> ChildExitStatus? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, 0)
            if result == pid { return ChildExitStatus(waitStatus: status) }
            if result < 0 && errno == EINTR { continue }
            return nil
        }
    }
}

/// Runs `body` with a NULL-terminated C array of the strings, valid for the call.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafePointer<UnsafeMutablePointer<CChar>?>) -> R) -> R {
    let pointers = strings.map { strdup($0) }
    defer { for pointer in pointers { free(pointer) } }
    let terminated = pointers + [nil]
    return terminated.withUnsafeBufferPointer { body($0.baseAddress!) }  // Safety: a non-empty array has a base address.
}

/// `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34), which the Glibc module does not import.
enum SpawnSymbols {
    typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    static let addCloseFrom: AddCloseFrom = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np") else {
            fatalError("libc lacks posix_spawn_file_actions_addclosefrom_np; AFMSystem needs glibc 2.34 or later")
        }
        return unsafeBitCast(symbol, to: AddCloseFrom.self)
    }()

    typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32
    /// `posix_spawn_file_actions_addchdir_np` (glibc 2.29): the child's working directory.
    static let addChdir: AddChdir = {
        guard let symbol = dlsym(nil, "posix_spawn_file_actions_addchdir_np") else {
            fatalError("libc lacks posix_spawn_file_actions_addchdir_np; AFMSystem needs glibc 2.29 or later")
        }
        return unsafeBitCast(symbol, to: AddChdir.self)
    }()
}
