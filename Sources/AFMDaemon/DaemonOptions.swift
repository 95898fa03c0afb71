// SPDX-License-Identifier: Apache-2.0

/// The command line of `afmd`, parsed by hand (no outside packages): stable flags that scripts can rely on.
public struct DaemonOptions: Sendable, Hashable {
    public var listen: String?
    public var configFile: String?
    public var configRoot: String?
    public var backendDirectory: String?
    public var logLevel: String?
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
                                 which is logged as "listening on HOST:PORT").
          --config FILE          Main configuration file (INI). Default: <config-root>/afmd.conf if present.
          --config-root DIR      Keep config, state and runtime files under DIR (tests, checkouts).
          --backend-dir DIR      Directory with backend manifests (<id>.json) and libraries (<id>.so).
          --log-level LEVEL      debug, info, warning or error (default info). Logs go to stderr, one line each.
          --version              Print the version and the backend ABI version, then exit.
          -h, --help             Print this help, then exit.

        Endpoints: GET /health, GET /status, GET /v1/models (/models), POST /v1/responses.
        Signals: SIGTERM/SIGINT drain in-flight requests, then exit.
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
            case "--version": showVersion = true
            case "-h", "--help": showHelp = true
            default: throw UsageError(message: "unknown option '\(argument)' (see afmd --help)")
            }
            index += 1
        }
    }
}
