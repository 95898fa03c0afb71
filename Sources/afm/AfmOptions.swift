// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient

/// The parsed command line of `afm`.
struct AfmOptions {
    enum Command {
        case chat
        /// `afm chat --web`: serve the web chat on this address.
        case web(host: String, port: Int)
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
        var rest = arguments[...]
        guard let first = rest.popFirst() else { return }
        var words: [String] = []
        var importDirectory: String?
        var web = false
        var listen: String?
        switch first {
        case "chat": command = .chat
        case "respond": command = .respond(nil)
        case "bridge": command = .bridge
        case "agent":
            if rest.contains("--help") || rest.contains("-h") {
                command = .help
            } else {
                command = .agent(try AgentOptions(arguments: rest))
            }
            return
        case "--help", "-h", "help": command = .help; return
        case "--version", "version": command = .version; return
        default: throw UsageError(message: "unknown command '\(first)' (try: afm --help)")
        }
        func value(_ option: String) throws -> String {
            guard let next = rest.popFirst() else { throw UsageError(message: "\(option) needs a value") }
            return next
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--model", "-m": model = try value(argument)
            case "--url":
                let text = try value(argument)
                guard let parsed = ServerURL(string: text) else {
                    throw UsageError(message: "--url must look like http://127.0.0.1:11535 (got '\(text)')")
                }
                url = parsed
            case "--data-dir": dataDirectory = try value(argument)
            case "--import": importDirectory = try value(argument)
            case "--web": web = true
            case "--listen": listen = try value(argument)
            case "--help", "-h": command = .help; return
            case "--": words += rest; rest = []
            default:
                if argument.hasPrefix("-") && argument != "-" { throw UsageError(message: "unknown option '\(argument)'") }
                words.append(argument)
            }
        }
        switch command {
        case .chat:
            if !words.isEmpty { throw UsageError(message: "afm chat takes no arguments (got '\(words[0])')") }
            if listen != nil && !web { throw UsageError(message: "--listen belongs to afm chat --web") }
            if web && importDirectory != nil { throw UsageError(message: "--web and --import cannot be combined") }
            if let importDirectory { command = .importArchive(importDirectory) }
            if web {
                let address = listen ?? Self.defaultWebListen
                guard let parsed = Self.parseListen(address) else {
                    throw UsageError(message: "--listen must look like 127.0.0.1:11536 or [::1]:11536 (got '\(address)')")
                }
                command = .web(host: parsed.host, port: parsed.port)
            }
        case .bridge:
            if importDirectory != nil { throw UsageError(message: "--import belongs to afm chat") }
            if web || listen != nil { throw UsageError(message: "--web and --listen belong to afm chat") }
            if !words.isEmpty { throw UsageError(message: "afm bridge takes no arguments (got '\(words[0])')") }
        case .respond:
            if importDirectory != nil { throw UsageError(message: "--import belongs to afm chat") }
            if web || listen != nil { throw UsageError(message: "--web and --listen belong to afm chat") }
            command = .respond(words.isEmpty || words == ["-"] ? nil : words.joined(separator: " "))
        default: break
        }
    }

    /// Where `afm chat --web` listens unless `--listen` says otherwise: loopback only.
    static let defaultWebListen = "127.0.0.1:11536"

    /// `HOST:PORT` or `[V6]:PORT` (port 0: any free port).
    static func parseListen(_ text: String) -> (host: String, port: Int)? {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]"), text[text.index(after: close)...].hasPrefix(":") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            portText = text[text.index(close, offsetBy: 2)...]
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        }
        guard !host.isEmpty, let port = Int(portText), (0...65535).contains(port) else { return nil }
        return (host == "localhost" ? "127.0.0.1" : String(host), port)
    }
}
