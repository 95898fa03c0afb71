// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMClient
import AFMConfig
import Foundation

/// The command line of `afm agent`, merged over its configuration file (`[Agent]` and `[MCP.<name>]`).
struct AgentOptions {
    var model: String?
    var url: ServerURL?
    var instructions: String?
    var mcpServers: [MCPServerConfiguration] = []
    var schemaPath: String?
    var maxToolCalls: Int?
    var toolTimeoutSeconds: Double?
    var json = false
    var configPath: String?
    /// The one-shot prompt ("-": standard input); nil for an interactive session.
    var prompt: String?

    typealias UsageError = AfmOptions.UsageError

    /// The longest timeout accepted (a million seconds; larger numbers would overflow the millisecond count).
    static let maximumSeconds = 1_000_000.0
    /// The shortest timeout accepted (a millisecond; shorter ones would become 0 ms, a limit no call can meet).
    static let minimumSeconds = 0.001

    init(arguments: ArraySlice<String>) throws {
        var rest = ArgumentCursor(arguments)
        var words: [String] = []
        var commandLineServers: [MCPServerConfiguration] = []
        var commandLineToolTimeout: Double?
        while let argument = rest.next() {
            switch argument {
            case "--model", "-m": model = try rest.value(argument)
            case "--url": url = try rest.url(argument)
            case "--instructions": instructions = try rest.value(argument)
            case "-f", "--instructions-file":
                let path = try rest.value(argument)
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                    throw UsageError(message: "cannot read the instructions file \(path)")
                }
                instructions = text
            case "--mcp":
                let spec = try rest.value(argument)
                guard let equals = spec.firstIndex(of: "="), equals != spec.startIndex else {
                    throw UsageError(message: "--mcp takes NAME=COMMAND (got '\(spec)')")
                }
                let words = Self.split(String(spec[spec.index(after: equals)...]))
                guard let command = words.first else { throw UsageError(message: "--mcp \(spec): the command is empty") }
                commandLineServers.append(
                    MCPServerConfiguration(name: String(spec[..<equals]), command: command, arguments: Array(words.dropFirst())))
            case "--schema": schemaPath = try rest.value(argument)
            case "--max-tool-calls":
                let text = try rest.value(argument)
                guard let number = Int(text), number >= 0 else { throw UsageError(message: "--max-tool-calls takes a number ≥ 0") }
                maxToolCalls = number
            case "--tool-timeout":
                let text = try rest.value(argument)
                guard let seconds = Double(text), seconds >= Self.minimumSeconds, seconds <= Self.maximumSeconds else {
                    throw UsageError(message: "--tool-timeout takes seconds ≥ 0.001 (at most \(Int(Self.maximumSeconds)))")
                }
                toolTimeoutSeconds = seconds
                commandLineToolTimeout = seconds
            case "--json": json = true
            case "--config": configPath = try rest.value(argument)
            case "--": words += rest.remaining()
            default:
                if argument.hasPrefix("-") && argument != "-" { throw UsageError(message: "unknown option '\(argument)'") }
                words.append(argument)
            }
        }
        prompt = words.isEmpty ? nil : words.joined(separator: " ")
        try applyConfigFile()
        // Servers named on the command line replace the file's servers of the same name.
        let names = Set(commandLineServers.map(\.name))
        mcpServers = mcpServers.filter { !names.contains($0.name) } + commandLineServers
        // --tool-timeout limits every call, MCP calls included (the file's ToolTimeout values are defaults); an MCP
        // server's calls are the only tools `afm agent` has.
        if let commandLine = commandLineToolTimeout {
            for index in mcpServers.indices { mcpServers[index].toolTimeout = .milliseconds(Int(commandLine * 1000)) }
        } else if let toolTimeoutSeconds {
            for index in mcpServers.indices where names.contains(mcpServers[index].name) {
                mcpServers[index].toolTimeout = .milliseconds(Int(toolTimeoutSeconds * 1000))
            }
        }
    }

    /// The default configuration file: `$XDG_CONFIG_HOME/afm/agent.conf`, else `~/.config/afm/agent.conf`.
    static var defaultConfigPath: String {
        let environment = ProcessInfo.processInfo.environment
        if let base = environment["XDG_CONFIG_HOME"], base.hasPrefix("/") { return base + "/afm/agent.conf" }
        return (environment["HOME"] ?? NSHomeDirectory()) + "/.config/afm/agent.conf"
    }

    /// Reads `[Agent]` (Model, URL, Instructions, MaxToolCalls, ToolTimeout) and `[MCP.<name>]` (Command, Args,
    /// Env, Directory, StartupTimeout, ToolTimeout); command-line values win. A missing default file is fine; a
    /// missing `--config` file is an error.
    private mutating func applyConfigFile() throws {
        let path = configPath ?? Self.defaultConfigPath
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            if configPath != nil { throw UsageError(message: "cannot read the configuration file \(path)") }
            return
        }
        let document: INIDocument
        do {
            document = try INIDocument(text: text, file: path)
        } catch {
            throw UsageError(message: "\(error)")
        }
        var servers: [String: MCPServerConfiguration] = [:]
        var order: [String] = []
        // Servers with their own ToolTimeout keep it; the others take [Agent] ToolTimeout (below).
        var ownTimeouts: Set<String> = []
        var fileToolTimeout: Double?
        for assignment in document.assignments {
            let place = "\(path):\(assignment.line)"
            func number() throws -> Double {
                guard let value = Double(assignment.value), value >= Self.minimumSeconds, value <= Self.maximumSeconds else {
                    throw UsageError(message: "\(place): \(assignment.key) takes seconds ≥ 0.001 (at most \(Int(Self.maximumSeconds)))")
                }
                return value
            }
            func seconds() throws -> Duration { .milliseconds(Int(try number() * 1000)) }
            if assignment.section == "Agent" {
                switch assignment.key {
                case "Model": model = model ?? assignment.value
                case "URL":
                    guard let parsed = ServerURL(string: assignment.value) else {
                        throw UsageError(message: "\(place): URL must look like http://127.0.0.1:11535")
                    }
                    url = url ?? parsed
                case "Instructions": instructions = instructions ?? assignment.value
                case "MaxToolCalls":
                    guard let number = Int(assignment.value), number >= 0 else {
                        throw UsageError(message: "\(place): MaxToolCalls takes a number ≥ 0")
                    }
                    maxToolCalls = maxToolCalls ?? number
                case "ToolTimeout": fileToolTimeout = try number()
                default: throw UsageError(message: "\(place): unknown key \(assignment.key) in [Agent]")
                }
            } else if assignment.section.hasPrefix("MCP."), assignment.section.count > 4 {
                let name = String(assignment.section.dropFirst(4))
                if servers[name] == nil { order.append(name) }
                var server = servers[name] ?? MCPServerConfiguration(name: name, command: "")
                switch assignment.key {
                case "Command": server.command = assignment.value
                case "Args": server.arguments = Self.split(assignment.value)
                case "Env":
                    guard let equals = assignment.value.firstIndex(of: "=") else {
                        throw UsageError(message: "\(place): Env takes KEY=VALUE")
                    }
                    server.environment[String(assignment.value[..<equals])] = String(assignment.value[assignment.value.index(after: equals)...])
                case "Directory": server.directory = assignment.value
                case "StartupTimeout": server.startupTimeout = try seconds()
                case "ToolTimeout":
                    server.toolTimeout = try seconds()
                    ownTimeouts.insert(name)
                default: throw UsageError(message: "\(place): unknown key \(assignment.key) in [\(assignment.section)]")
                }
                servers[name] = server
            } else {
                throw UsageError(message: "\(place): unknown section [\(assignment.section)] (expected [Agent] or [MCP.<name>])")
            }
        }
        for name in order {
            guard var server = servers[name], !server.command.isEmpty else {
                throw UsageError(message: "\(path): [MCP.\(name)] has no Command")
            }
            if let fileToolTimeout, !ownTimeouts.contains(name) { server.toolTimeout = .milliseconds(Int(fileToolTimeout * 1000)) }
            mcpServers.append(server)
        }
        toolTimeoutSeconds = toolTimeoutSeconds ?? fileToolTimeout
    }

    /// Splits a command line on whitespace, keeping single- or double-quoted words together.
    static func split(_ text: String) -> [String] {
        var words: [String] = []
        var current = ""
        var quote: Character?
        var inWord = false
        for character in text {
            if let open = quote {
                if character == open { quote = nil } else { current.append(character) }
            } else if character == "'" || character == "\"" {
                quote = character
                inWord = true
            } else if character.isWhitespace {
                if inWord { words.append(current) }
                current = ""
                inWord = false
            } else {
                current.append(character)
                inWord = true
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
