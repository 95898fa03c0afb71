// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON

/// Writes a turn's events for people (text as it streams, tool calls and results as dim lines) or, with
/// `--json`, as one JSON object per line.
final class AgentEventPrinter {
    private let console: Console
    private let json: Bool
    private var atLineStart = true

    init(console: Console, json: Bool) {
        self.console = console
        self.json = json
    }

    /// Prints one event; returns the exit status when it is the turn's last.
    func print(_ event: AgentEvent) -> Int32? {
        if json {
            console.write(event.json.jsonString + "\n")
            switch event {
            case .completed: return 0
            case .failed(let error): return error.code.exitStatus
            default: return nil
            }
        }
        switch event {
        case .text(let delta, _, let isReset):
            if isReset { newline() }
            // Model text is neutralized on a terminal; a script reading a pipe gets it unchanged.
            write(console.isTerminal ? console.shown(delta) : delta)
        case .partial:
            break  // the final JSON is printed once complete
        case .toolCallStarted(let call), .toolCallRequested(let call):
            newline()
            console.write(console.dim("→ \(console.field(call.name))(\(console.field(Self.short(call.arguments))))") + "\n")
        case .toolCallCompleted(let record):
            newline()
            let label = record.output.isError ? "✗" : "←"
            console.write(console.dim("\(label) \(console.field(record.call.name)): \(console.field(Self.short(record.output.text)))") + "\n")
        case .completed(let response):
            if let structured = response.json {
                newline()
                write(structured.jsonString)
            }
            newline()
            return 0
        case .failed(let error):
            newline()
            console.error("afm: \(error.code.rawValue): \(error.message)")
            return error.code.exitStatus
        }
        return nil
    }

    private func write(_ text: String) {
        guard !text.isEmpty else { return }
        console.write(text)
        atLineStart = text.hasSuffix("\n")
    }

    private func newline() {
        if !atLineStart { console.write("\n") }
        atLineStart = true
    }

    /// One line of at most 200 characters.
    static func short(_ text: String) -> String {
        let line = text.split(separator: "\n", omittingEmptySubsequences: false).joined(separator: " ⏎ ")
        return line.count > 200 ? String(line.prefix(199)) + "…" : line
    }
}
