// SPDX-License-Identifier: Apache-2.0

@preconcurrency import Glibc

/// How a child process ended, decoded from a `waitpid` status.
public enum ChildExitStatus: Sendable, Hashable, CustomStringConvertible {
    /// It called `exit` (or returned from `main`) with this status.
    case exited(Int32)
    /// A signal ended it (`SIGSEGV` is 11, `SIGABRT` 6, `SIGKILL` 9).
    case signalled(Int32)

    /// Decodes a raw `waitpid` status (the `WIFEXITED`/`WTERMSIG` macros, which Swift does not import).
    public init(waitStatus status: Int32) {
        if status & 0x7f == 0 {
            self = .exited((status >> 8) & 0xff)
        } else {
            self = .signalled(status & 0x7f)
        }
    }

    /// The signal number, when a signal ended the process.
    public var signal: Int32? {
        if case .signalled(let number) = self { number } else { nil }
    }

    /// The exit status, when the process exited.
    public var exitCode: Int32? {
        if case .exited(let code) = self { code } else { nil }
    }

    /// "exit status 3" or "signal 11 (SIGSEGV)".
    public var description: String {
        switch self {
        case .exited(let code): "exit status \(code)"
        case .signalled(let number): "signal \(number) (\(Self.signalName(number)))"
        }
    }

    /// The conventional name of a signal number, for logs and status output.
    public static func signalName(_ number: Int32) -> String {
        switch number {
        case SIGHUP: "SIGHUP"
        case SIGINT: "SIGINT"
        case SIGQUIT: "SIGQUIT"
        case SIGILL: "SIGILL"
        case SIGTRAP: "SIGTRAP"
        case SIGABRT: "SIGABRT"
        case SIGBUS: "SIGBUS"
        case SIGFPE: "SIGFPE"
        case SIGKILL: "SIGKILL"
        case SIGSEGV: "SIGSEGV"
        case SIGPIPE: "SIGPIPE"
        case SIGALRM: "SIGALRM"
        case SIGTERM: "SIGTERM"
        case SIGXCPU: "SIGXCPU"
        case SIGXFSZ: "SIGXFSZ"
        case SIGSYS: "SIGSYS"
        default: "signal \(number)"
        }
    }
}
