// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient

/// The parsed command line of `afm`.
struct AfmOptions {
    enum Command {
        case chat
        case importArchive(String)
        case respond(String?)
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
        switch first {
        case "chat": command = .chat
        case "respond": command = .respond(nil)
        case "bridge": command = .bridge
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
            case "--help", "-h": command = .help; return
            case "--": words += rest; rest = []
            default:
                if argument.hasPrefix("-") && argument != "-" { throw UsageError(message: "unknown option '\(argument)'") }
                words.append(argument)
            }
        }
        switch command {
        case .chat:
            if let importDirectory { command = .importArchive(importDirectory) }
            if !words.isEmpty { throw UsageError(message: "afm chat takes no arguments (got '\(words[0])')") }
        case .bridge:
            if importDirectory != nil { throw UsageError(message: "--import belongs to afm chat") }
            if !words.isEmpty { throw UsageError(message: "afm bridge takes no arguments (got '\(words[0])')") }
        case .respond:
            if importDirectory != nil { throw UsageError(message: "--import belongs to afm chat") }
            command = .respond(words.isEmpty || words == ["-"] ? nil : words.joined(separator: " "))
        default: break
        }
    }
}
