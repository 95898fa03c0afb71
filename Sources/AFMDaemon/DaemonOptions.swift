// SPDX-License-Identifier: Apache-2.0

/// The command line of `afmd`, parsed by hand (no outside packages): stable flags that scripts can rely on.
public struct DaemonOptions: Sendable, Hashable {
    public var listen: String?
    public var configFile: String?
    public var configRoot: String?
    public var backendDirectory: String?
    public var logLevel: String?
    public var adminSocket: String?
    public var checkConfig = false
    public var showVersion = false
    public var showHelp = false

    /// A usage error: printed as one `Error:` line, exit status 64 (EX_USAGE).
    public struct UsageError: Error, Sendable, Hashable, CustomStringConvertible {
        public var message: String
        public var description: String { message }
    }

    public static let help = """
        Usage: afmd [OPTIONS]

        The AFM inference gateway daemon: loads model backends (.so plugins speaking the AFM backend ABI)
        and serves them through the OpenAI Responses API over HTTP/1.1.

        Options:
          --listen HOST:PORT     Address to serve HTTP on (default 127.0.0.1:11535; port 0 picks a free port,
                                 which is logged as "listening on HOST:PORT"), or unix:PATH for a Unix socket.
                                 Without API keys ([Server] APIKeyFile) only loopback or a Unix socket is
                                 served, unless [Server] AllowUnauthenticated=yes. Sockets passed by systemd
                                 (LISTEN_FDS: afmd.socket, systemd-socket-activate) are served instead.
          --config FILE          Main configuration file (INI), instead of the first of /etc/afm/afmd.conf and
                                 /usr/lib/afm/afmd.conf. Drop-ins afmd.conf.d/*.conf are read either way.
          --config-root DIR      Relocate everything under DIR: DIR/etc/afm, DIR/usr/lib/afm, DIR/var/lib/afm,
                                 DIR/run/afm (and DIR/afmd.conf as a last main file). For tests and checkouts.
          --backend-dir DIR      Directory with backend manifests (<id>.json) and libraries (<id>.so).
          --admin-socket PATH    The admin socket (default /run/afm/admin.sock, or $XDG_RUNTIME_DIR/afm/admin.sock).
          --log-level LEVEL      debug, info, warning or error (default info). Logs go to stderr, one line each.
          --check-config         Load and validate the configuration, print every value with its origin, exit
                                 (0 valid, 78 invalid).
          --version              Print the version and the backend ABI version, then exit.
          -h, --help             Print this help, then exit.

        Configuration layers, lowest first: defaults, main file, drop-ins, the control layer written through the
        admin socket (<state>/control.json), AFM_<SECTION>_<KEY> environment variables, the command line.
        Endpoints: GET /health, GET /ready, GET /metrics, GET /status, GET /v1/models (/models),
        POST /v1/responses, POST /v1/chat/completions, POST /v1/messages.
        Signals: SIGTERM/SIGINT fail /ready at once, keep serving for [Server] DrainDelaySeconds (5), close the
        listener, let in-flight requests finish, then exit; SIGHUP reloads the configuration (API keys included)
        and every backend whose settings, model file or library changed. Control: afmctl (see afmctl --help).
        """

    public init() {}

    /// Parses `arguments` (without the program name). Accepts `--flag value` and `--flag=value`.
    public init(arguments: [String]) throws(UsageError) {
        var index = 0
        func value(for flag: String, inline: String?) throws(UsageError) -> String {
            if let inline { return inline }
            index += 1
            guard index < arguments.count, !arguments[index].hasPrefix("--") else {
                throw UsageError(message: "\(flag) needs a value (see afmd --help)")
            }
            return arguments[index]
        }
        while index < arguments.count {
            let argument = arguments[index]
            let parts = argument.split(separator: "=", maxSplits: 1).map(String.init)
            let flag = parts[0]
            let inline = parts.count > 1 ? parts[1] : nil
            switch flag {
            case "--listen": listen = try value(for: flag, inline: inline)
            case "--config": configFile = try value(for: flag, inline: inline)
            case "--config-root": configRoot = try value(for: flag, inline: inline)
            case "--backend-dir": backendDirectory = try value(for: flag, inline: inline)
            case "--log-level": logLevel = try value(for: flag, inline: inline)
            case "--admin-socket": adminSocket = try value(for: flag, inline: inline)
            case "--check-config": checkConfig = true
            case "--version": showVersion = true
            case "-h", "--help": showHelp = true
            default: throw UsageError(message: "unknown option '\(argument)' (see afmd --help)")
            }
            index += 1
        }
    }
}
