// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMConfig
import AFMWebChat

/// The parsed command line of `afm`.
struct AfmOptions {
    enum Command {
        case chat
        /// `afm chat --web`: serve the web chat on this address.
        case web(host: String, port: Int, allowRemote: Bool)
        case importArchive(String)
        case respond(String?)
        case agent(AgentOptions)
        case bridge
        case help
        case version
    }

    var command = Command.help
    var model: String?
    var url = ServerURL.default
    var dataDirectory: String?

    /// A usage error (exit 64).
    struct UsageError: Error {
        var message: String
    }

    init(arguments: [String]) throws {
        var rest = ArgumentCursor(arguments[...])
        guard let first = rest.next() else { return }
        var words: [String] = []
        var importDirectory: String?
        var web = false
        var listen: String?
        var allowRemote = false
        switch first {
        case "chat": command = .chat
        case "respond": command = .respond(nil)
        case "bridge": command = .bridge
        case "agent":
            if rest.rest.contains("--help") || rest.rest.contains("-h") {
                command = .help
            } else {
                command = .agent(try AgentOptions(arguments: rest.rest))
            }
            return
        case "--help", "-h", "help": command = .help; return
        case "--version", "version": command = .version; return
        default: throw UsageError(message: "unknown command '\(first)' (try: afm --help)")
        }
        while let argument = rest.next() {
            switch argument {
            case "--model", "-m": model = try rest.value(argument)
            case "--url": url = try rest.url(argument)
            case "--data-dir": dataDirectory = try rest.value(argument)
            case "--import": importDirectory = try rest.value(argument)
            case "--web": web = true
            case "--listen": listen = try rest.value(argument)
            case "--allow-remote": allowRemote = true
            case "--help", "-h": command = .help; return
            case "--": words += rest.remaining()
            default:
                if argument.hasPrefix("-") && argument != "-" { throw UsageError(message: "unknown option '\(argument)'") }
                words.append(argument)
            }
        }
        switch command {
        case .chat:
            if !words.isEmpty { throw UsageError(message: "afm chat takes no arguments (got '\(words[0])')") }
            if (listen != nil || allowRemote) && !web { throw UsageError(message: "--listen and --allow-remote belong to afm chat --web") }
            if web && importDirectory != nil { throw UsageError(message: "--web and --import cannot be combined") }
            if let importDirectory { command = .importArchive(importDirectory) }
            if web {
                let address = listen ?? Self.defaultWebListen
                guard let parsed = Self.parseListen(address) else {
                    throw UsageError(message: "--listen must look like 127.0.0.1:11536 or [::1]:11536 (got '\(address)')")
                }
                // The web chat has no login: whoever reaches the address reads the whole history and spends the gateway.
                if !allowRemote && !WebChatServer.isLoopback(host: parsed.host) {
                    throw UsageError(
                        message: "--listen \(address) is reachable from other machines and the web chat has no login; add --allow-remote to mean it")
                }
                command = .web(host: parsed.host, port: parsed.port, allowRemote: allowRemote)
            }
        case .bridge:
            if importDirectory != nil { throw UsageError(message: "--import belongs to afm chat") }
            if web || listen != nil || allowRemote { throw UsageError(message: "--web, --listen and --allow-remote belong to afm chat") }
            if !words.isEmpty { throw UsageError(message: "afm bridge takes no arguments (got '\(words[0])')") }
        case .respond:
            if importDirectory != nil { throw UsageError(message: "--import belongs to afm chat") }
            if web || listen != nil || allowRemote { throw UsageError(message: "--web, --listen and --allow-remote belong to afm chat") }
            command = .respond(words.isEmpty || words == ["-"] ? nil : words.joined(separator: " "))
        default: break
        }
    }

    /// Where `afm chat --web` listens unless `--listen` says otherwise: loopback only.
    static let defaultWebListen = "127.0.0.1:11536"

    /// `HOST:PORT` or `[V6]:PORT` (port 0: any free port); `localhost` is 127.0.0.1.
    static func parseListen(_ text: String) -> (host: String, port: Int)? {
        guard let parsed = HostPort(text) else { return nil }
        return (parsed.host == "localhost" ? "127.0.0.1" : parsed.host, parsed.port)
    }
}
