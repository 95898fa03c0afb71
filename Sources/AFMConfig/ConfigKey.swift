// SPDX-License-Identifier: Apache-2.0

/// One key of the configuration schema: where it lives, its type, its compiled-in default and what it does.
///
/// The full table is ``ConfigSchema/keys``; `etc/afmd.conf` is generated from it (``ConfigSchema/renderDefaultFile()``).
public struct ConfigKey: Sendable, Hashable, CustomStringConvertible {
    /// The INI section, for example `Server`.
    public var section: String
    /// The key inside the section, for example `Listen`.
    public var key: String
    /// How values are validated and read.
    public var type: ConfigValueType
    /// The compiled-in default, as text (the lowest layer).
    public var defaultValue: String
    /// One line for `etc/afmd.conf` and `afmctl config show`.
    public var summary: String

    /// Creates a schema entry.
    public init(section: String, key: String, type: ConfigValueType, defaultValue: String, summary: String) {
        self.section = section
        self.key = key
        self.type = type
        self.defaultValue = defaultValue
        self.summary = summary
    }

    /// `Section.Key`, the name used by `afmctl config show`, `GetConfig` and error messages.
    public var name: String { "\(section).\(key)" }

    /// The environment variable that sets this key: `AFM_` + section + key in upper snake case
    /// (`Server.ShutdownTimeoutSeconds` → `AFM_SERVER_SHUTDOWN_TIMEOUT_SECONDS`).
    public var environmentVariable: String { "AFM_" + Self.snake(section) + "_" + Self.snake(key) }

    /// The generic command-line flag for this key: `--section.key` in lower case (`--server.listen`).
    public var commandLineFlag: String { "--" + name.lowercased() }

    public var description: String { name }

    static func snake(_ camel: String) -> String {
        var result = ""
        let characters = Array(camel)
        for (index, character) in characters.enumerated() {
            if character.isUppercase, index > 0,
                characters[index - 1].isLowercase
                    || (index + 1 < characters.count && characters[index + 1].isLowercase && characters[index - 1].isUppercase)
            {
                result.append("_")
            }
            result.append(character.uppercased())
        }
        return result
    }
}

// MARK: - The keys

extension ConfigKey {
    /// `[Server] Listen`: the HTTP listen address.
    public static let serverListen = ConfigKey(
        section: "Server", key: "Listen", type: .listenAddress, defaultValue: "127.0.0.1:11535",
        summary: "Address to serve HTTP on. Port 0 picks a free port (logged as \"listening on HOST:PORT\").")
    /// `[Server] ShutdownTimeoutSeconds`.
    public static let serverShutdownTimeout = ConfigKey(
        section: "Server", key: "ShutdownTimeoutSeconds", type: .seconds(1...86_400), defaultValue: "30",
        summary: "How long SIGTERM waits for in-flight responses before closing what is left.")
    /// `[Server] RequestHeaderTimeoutSeconds`.
    public static let serverRequestHeaderTimeout = ConfigKey(
        section: "Server", key: "RequestHeaderTimeoutSeconds", type: .seconds(1...86_400), defaultValue: "30",
        summary: "A connection that sends no complete request header within this time gets 408 and is closed.")
    /// `[Server] ProcessingDeadlineSeconds`.
    public static let serverProcessingDeadline = ConfigKey(
        section: "Server", key: "ProcessingDeadlineSeconds", type: .seconds(1...86_400), defaultValue: "300",
        summary: "A request still being processed after this time is cancelled: 504 timeout, or a stream already "
            + "under way ends with its dialect's error event (code timeout).")
    /// `[Server] IOThreads`: 0 means one per CPU the process may run on, at most 4.
    public static let serverIOThreads = ConfigKey(
        section: "Server", key: "IOThreads", type: .integer(0...64), defaultValue: "0",
        summary: "Threads that read requests and write responses (each runs one epoll loop; connections are spread "
            + "over them). 0: one per CPU afmd may run on, at most 4.")
    /// `[Server] MaxConnections`: HTTP connections open at once; more are answered 503 and closed.
    public static let serverMaxConnections = ConfigKey(
        section: "Server", key: "MaxConnections", type: .integer(1...1_000_000), defaultValue: "1024",
        summary: "HTTP connections open at once. One more is answered 503 (busy, Retry-After: 1) and closed; afmd "
            + "raises its open-file limit to fit, or lowers this to what the limit allows and says so.")
    /// `[Server] AllowedHosts`: names accepted in `Host` besides loopback names and the listen address.
    public static let serverAllowedHosts = ConfigKey(
        section: "Server", key: "AllowedHosts", type: .list, defaultValue: "",
        summary: "Further names clients may use in Host (a protection against DNS rebinding), such as the LAN name "
            + "of the machine or a proxy's; loopback names and the listen address are always accepted. *: any name.")
    /// `[Server] AllowedOrigins`: web origins whose pages may call the API (CORS).
    public static let serverAllowedOrigins = ConfigKey(
        section: "Server", key: "AllowedOrigins", type: .list, defaultValue: "",
        summary: "Web origins (scheme://host[:port]) whose pages may call the API from a browser; pages on the "
            + "gateway's own host and loopback pages calling a loopback address always may. *: any origin.")
    /// `[Server] ListenSocketMode`: permission bits of a `unix:` listen socket.
    public static let serverListenSocketMode = ConfigKey(
        section: "Server", key: "ListenSocketMode", type: .fileMode, defaultValue: "0660",
        summary: "Permission bits (octal) of the socket file when Listen is unix:PATH; connecting needs write "
            + "permission, so 0660 admits the daemon's user and group.")
    /// `[Server] APIKeyFile`: the API keys (one a line: KEY, NAME:KEY or NAME:sha256:HEX).
    public static let serverAPIKeyFile = ConfigKey(
        section: "Server", key: "APIKeyFile", type: .path, defaultValue: "",
        summary: "File of API keys, one a line: KEY, NAME:KEY or NAME:sha256:HEX (the key's SHA-256, so the file "
            + "holds no secret). Clients send Authorization: Bearer KEY or x-api-key: KEY; /health and /ready are "
            + "open. Empty: no authentication. Reloaded with afmctl reload / SIGHUP.")
    /// `[Server] AllowUnauthenticated`: serve a non-loopback address without keys.
    public static let serverAllowUnauthenticated = ConfigKey(
        section: "Server", key: "AllowUnauthenticated", type: .boolean, defaultValue: "no",
        summary: "Without API keys afmd refuses to listen on an address other than loopback or a Unix socket; yes "
            + "serves it anyway (a proxy in front authenticates).")
    /// `[Server] MetricsRequireKey`: whether `/metrics` needs a key when keys are configured.
    public static let serverMetricsRequireKey = ConfigKey(
        section: "Server", key: "MetricsRequireKey", type: .boolean, defaultValue: "yes",
        summary: "Whether GET /metrics needs an API key when keys are configured (no: a scraper reads it without one).")
    /// `[Server] DrainDelaySeconds`: how long SIGTERM keeps serving with /ready at 503 before closing the listener.
    public static let serverDrainDelay = ConfigKey(
        section: "Server", key: "DrainDelaySeconds", type: .seconds(0...3600), defaultValue: "5",
        summary: "On SIGTERM /ready answers 503 at once and the listener keeps serving this long, so a load balancer "
            + "stops sending requests before the listener closes; then in-flight responses finish.")
    /// `[Server] AccessLog`: one log line per API request.
    public static let serverAccessLog = ConfigKey(
        section: "Server", key: "AccessLog", type: .boolean, defaultValue: "no",
        summary: "Log one line per API request (afmd.access: key name, dialect, model, status, tokens, time to "
            + "first token, duration; never a body or a key).")
    /// `[Backends] Directory`: empty means "next to the executable".
    public static let backendsDirectory = ConfigKey(
        section: "Backends", key: "Directory", type: .path, defaultValue: "",
        summary: "Directory with backend manifests (<id>.json) and libraries (<id>.so). Empty: ../lib/afm/backends "
            + "relative to the afmd executable (/usr/lib/afm/backends when installed).")
    /// `[Backends] Disabled`.
    public static let backendsDisabled = ConfigKey(
        section: "Backends", key: "Disabled", type: .list, defaultValue: "",
        summary: "Backend ids not to load, separated by commas or spaces.")
    /// `[Backends] SilenceTimeoutSeconds`.
    public static let backendsSilenceTimeout = ConfigKey(
        section: "Backends", key: "SilenceTimeoutSeconds", type: .seconds(1...86_400), defaultValue: "300",
        summary: "A backend that sends no event for this long has its generation failed with \"timeout\" (the watchdog).")
    /// `[Backends] CancelGraceSeconds`.
    public static let backendsCancelGrace = ConfigKey(
        section: "Backends", key: "CancelGraceSeconds", type: .seconds(1...86_400), defaultValue: "5",
        summary: "A backend must end a cancelled generation within this time, or it is cut off.")
    /// `[Backends] DrainTimeoutSeconds`.
    public static let backendsDrainTimeout = ConfigKey(
        section: "Backends", key: "DrainTimeoutSeconds", type: .seconds(1...86_400), defaultValue: "120",
        summary: "After a reload, the old generation may finish its requests for this long; the rest are then cancelled.")
    /// `[Responses] CommonPrompt`.
    public static let responsesCommonPrompt = ConfigKey(
        section: "Responses", key: "CommonPrompt", type: .string, defaultValue: "",
        summary: "Text prepended to the instructions of every request (\"\\n\" starts a new line); each request "
            + "snapshots it when it starts. `afmctl prompt set` edits it.")
    /// `[Responses] MaxOutputBytes`.
    public static let responsesMaxOutputBytes = ConfigKey(
        section: "Responses", key: "MaxOutputBytes", type: .integer(1024...1_073_741_824), defaultValue: "8388608",
        summary: "The most bytes of output (text, tool-call arguments and reasoning, together) one response may "
            + "accumulate; a generation that goes past it is stopped and fails with output_limit_exceeded. The "
            + "default, 8 MiB, is far above any answer within a model's output budget.")
    /// `[Admin] Socket`: empty means `<runtime dir>/admin.sock`.
    public static let adminSocket = ConfigKey(
        section: "Admin", key: "Socket", type: .path, defaultValue: "",
        summary: "Path of the admin socket. Empty: admin.sock in the runtime directory (/run/afm/admin.sock, or "
            + "$XDG_RUNTIME_DIR/afm/admin.sock for a user).")
    /// `[Admin] OperatorGroups`.
    public static let adminOperatorGroups = ConfigKey(
        section: "Admin", key: "OperatorGroups", type: .list, defaultValue: "afm",
        summary: "Members of these groups get the operator level on the admin socket (reload, listener start/stop).")
    /// `[Admin] SocketGroup`: empty keeps the daemon's own group.
    public static let adminSocketGroup = ConfigKey(
        section: "Admin", key: "SocketGroup", type: .string, defaultValue: "",
        summary: "Group (name or id) that owns the admin socket, mode 0660, so its members can connect; the daemon "
            + "must be a member. Empty: the daemon's own group. The Debian package sets afm.")
    /// `[Cloud] Preference`.
    public static let cloudPreference = ConfigKey(
        section: "Cloud", key: "Preference", type: .boolean, defaultValue: "no",
        summary: "Prefer the private-cloud backend when a request names no concrete model (yes or no).")
}
