// SPDX-License-Identifier: Apache-2.0
import AFMBridge
import AFMChat
import AFMClient
import AFMCore
import AFMLogging
import AFMSystem
import Foundation

/// `afm`: the terminal chat client of the gateway.
@main
enum AfmMain {
    static func main() {
        // First, before any other thread: a mask inherited from the starter (a test's dispatch worker blocks SIGTERM)
        // would make afm ignore the signals that should end it.
        InheritedSignals.reset()
        let console = Console()
        let options: AfmOptions
        do {
            options = try AfmOptions(arguments: Array(CommandLine.arguments.dropFirst()))
        } catch let error as AfmOptions.UsageError {
            console.error("afm: \(error.message)")
            exit(64)
        } catch {
            exit(64)
        }
        let dataDirectory = options.dataDirectory ?? HistoryStore.defaultDirectory()
        let client = ResponsesClient(url: options.url)
        switch options.command {
        case .help:
            console.write(AfmHelp.text + "\n")
        case .version:
            console.write("afm \(AFMVersion.string)\n")
        case .chat:
            // Taken by the chat's signal thread (a terminal resize redraws the line); blocked before any thread starts.
            SignalListener.blockInCallingThread([SIGWINCH])
            let status: Int32
            do {
                let store = try HistoryStore(directory: dataDirectory)
                status = ChatSession(store: store, console: console, client: client, model: options.model).run()
            } catch {
                console.error("afm: cannot open the history in \(dataDirectory): \(error)")
                exit(70)
            }
            exit(status)  // after the store is released: it removes its lease file
        case .web(let host, let port, let allowRemote):
            exit(WebCommand(console: console, client: client, dataDirectory: dataDirectory).run(host: host, port: port, allowRemote: allowRemote))
        case .importArchive(let directory):
            do {
                let store = try HistoryStore(directory: dataDirectory)
                let outcome = try ArchiveImporter(store: store).importArchive(at: directory)
                if outcome.alreadyImported {
                    console.write("\(directory) was imported before; nothing to do\n")
                } else {
                    console.write("imported \(outcome.conversations) conversations, \(outcome.messages) messages, \(outcome.images) images\n")
                }
            } catch {
                console.error("afm: import failed, nothing was changed: \(error)")
                exit(65)
            }
        case .respond(let text):
            exit(RespondCommand(console: console, client: client, model: options.model).run(text: text))
        case .agent(let agentOptions):
            exit(AgentCommand(console: console, options: agentOptions).run())
        case .bridge:
            // Blocked before any thread exists, so the bridge's signal thread takes them (SignalListener).
            SignalListener.blockInCallingThread([SIGTERM, SIGINT])
            let configuration = BridgeConfiguration(url: options.url, model: options.model ?? "on-device")
            exit(StdioBridge.run(configuration: configuration, logger: Logger(label: "afm-bridge", sink: .standardError)))
        }
        exit(0)
    }
}
