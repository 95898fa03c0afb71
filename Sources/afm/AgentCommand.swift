// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMClient
import AFMCore
import AFMJSON
import AFMSystem
import Foundation
import Synchronization

/// `afm agent`: an agent over the gateway with the tools of MCP servers, one-shot with a prompt or interactive.
struct AgentCommand {
    let console: Console
    let options: AgentOptions

    /// Runs and returns the exit status (0, 64 usage, else the failing turn's `AgentError` exit status).
    func run() -> Int32 {
        let schema: AgentSchema?
        do {
            schema = try options.schemaPath.map(Self.loadSchema)
        } catch {
            console.error("afm: \(error)")
            return 64
        }
        let url = options.url ?? .default
        guard let model = GatewayModel.resolve(options.model, client: ResponsesClient(url: url), console: console) else {
            return AgentErrorCode.modelUnavailable.exitStatus
        }
        let configurations = options.mcpServers
        let started = BlockingTask.run { () -> Result<[MCPServer], AgentError> in
            do throws(AgentError) {
                return .success(try await MCPServer.startAll(configurations))
            } catch {
                return .failure(error)
            }
        }
        let servers: [MCPServer]
        switch started {
        case .success(let list): servers = list
        case .failure(let error):
            console.error("afm: \(error.message)")
            return error.code.exitStatus
        }
        defer { BlockingTask.run { for server in servers { await server.shutdown() } } }

        var policy = TurnPolicy(maxToolCalls: options.maxToolCalls, schema: schema)
        if let seconds = options.toolTimeoutSeconds { policy.toolTimeout = .milliseconds(Int(seconds * 1000)) }
        let agent = Agent(
            configuration: .init(url: url, model: model, instructions: options.instructions, toolProviders: servers, policy: policy))
        if var prompt = options.prompt {
            if prompt == "-" { prompt = String(decoding: FileHandle.standardInput.readDataToEndOfFile(), as: UTF8.self) }
            guard !prompt.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                console.error("afm: nothing to ask (give PROMPT, or - to read it from standard input)")
                return 64
            }
            var unused: [UInt8] = []
            return turn(agent: agent, prompt: prompt, keyboard: nil, typeAhead: &unused)
        }
        return interactive(agent: agent)
    }

    /// Reads a schema file: a JSON Schema, or `{"name":…,"schema":{…}}`.
    static func loadSchema(_ path: String) throws -> AgentSchema {
        guard let bytes = FileManager.default.contents(atPath: path) else {
            throw AfmOptions.UsageError(message: "cannot read the schema file \(path)")
        }
        guard let value = try? JSONParser.parse(Array(bytes)), value.objectValue != nil else {
            throw AfmOptions.UsageError(message: "the schema file \(path) is not a JSON object")
        }
        if let inner = value["schema"], inner.objectValue != nil {
            return AgentSchema(name: value["name"]?.stringValue ?? "answer", schema: inner)
        }
        return AgentSchema(name: "answer", schema: value)
    }

    /// One turn, its events printed as they come; Ctrl-C on `keyboard` (a terminal in key mode) cancels it, and
    /// other keys typed meanwhile are kept in `typeAhead` for the next prompt.
    private func turn(agent: Agent, prompt: String, keyboard: FileDescriptor?, typeAhead: inout [UInt8]) -> Int32 {
        let run = agent.run(prompt)
        let json = options.json
        let status = Mutex<Int32?>(nil)
        let finished = DispatchSemaphore(value: 0)
        Task {
            let printer = AgentEventPrinter(console: Console(), json: json)
            var last: Int32 = AgentErrorCode.generationFailed.exitStatus
            for await event in run {
                if let code = printer.print(event) { last = code }
            }
            status.withLock { $0 = last }
            finished.signal()
        }
        if let keyboard {
            var byte: UInt8 = 0
            while status.withLock({ $0 }) == nil {
                let ready = (try? PollSet.waitReadable([keyboard], timeoutMilliseconds: 100)) ?? []
                guard ready.contains(keyboard) else { continue }
                let result = try? withUnsafeMutableBytes(of: &byte) { try keyboard.read(into: $0) }
                if case .processed(1)? = result {
                    if byte == 0x03 { run.cancel() } else { typeAhead.append(byte) }
                }
                if case .processed(0)? = result { break }
            }
        }
        finished.wait()
        return status.withLock { $0 } ?? 70
    }

    /// Turns from lines typed (a terminal: line editing as in `afm chat`) or piped, until /quit or end of input.
    /// A terminal session exits 0 (failures were shown as they happened); a piped one with its last turn's status.
    private func interactive(agent: Agent) -> Int32 {
        let keyboard = FileDescriptor(rawValue: 0)
        let terminal = Terminal.isTerminal(keyboard) ? Terminal(descriptor: keyboard) : nil
        if let terminal {
            do { try terminal.enterKeyMode() } catch { console.error("afm: cannot set up the terminal: \(error)") }
            console.write(console.dim("(agent on \(agent.configuration.model); /new forgets the conversation, /quit leaves, Ctrl-C stops an answer)") + "\n")
        }
        defer { terminal?.restore() }
        var editor = LineEditor(echo: terminal != nil)
        var last: Int32 = 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        var pending: [UInt8] = []
        func columns() -> Int { Terminal.columns(FileDescriptor(rawValue: 1)) ?? 80 }
        func prompt() { if terminal != nil { console.write(editor.start(prompt: console.bold("you> "), columns: columns())) } }
        prompt()
        while true {
            if pending.isEmpty {
                _ = try? PollSet.waitReadable([keyboard], timeoutMilliseconds: -1)
                let result = try? buffer.withUnsafeMutableBytes { try keyboard.read(into: $0) }
                if case .wouldBlock? = result { continue }
                guard case .processed(let count)? = result, count > 0 else {
                    if terminal != nil { console.write("\n") }
                    if !editor.text.isEmpty { last = ask(agent, editor.text, terminal != nil, typeAhead: &pending) }
                    return terminal != nil ? 0 : last
                }
                pending = Array(buffer[0..<count])
            }
            var echo = ""
            var index = 0
            var action: LineEditor.Action?
            while index < pending.count && action == nil {
                action = editor.feed(pending[index], echoing: &echo)
                index += 1
            }
            pending.removeFirst(index)
            console.write(echo)
            if terminal != nil && editor.needsRedraw && action == nil { console.write(editor.redraw(columns: columns())) }
            switch action {
            case .line(let line)?:
                let text = line.trimmingCharacters(in: .whitespaces)
                if text == "/quit" { return terminal != nil ? 0 : last }
                if text == "/new" {
                    agent.clearHistory()
                    console.write(console.dim("(a new conversation)") + "\n")
                } else if !text.isEmpty {
                    // Up and Ctrl-R recall the lines entered in this session (as in `afm chat`, minus the store).
                    if terminal != nil, editor.history.last != line { editor.history.append(line) }
                    last = ask(agent, line, terminal != nil, typeAhead: &pending)
                }
                prompt()
            case .interrupt?:
                prompt()
            case .endOfInput?:
                if terminal != nil { console.write("\n") }
                return terminal != nil ? 0 : last
            case nil:
                break
            }
        }
    }

    private func ask(_ agent: Agent, _ line: String, _ interactive: Bool, typeAhead: inout [UInt8]) -> Int32 {
        turn(agent: agent, prompt: line, keyboard: interactive ? FileDescriptor(rawValue: 0) : nil, typeAhead: &typeAhead)
    }
}
