// SPDX-License-Identifier: Apache-2.0

extension ScriptStep {
    /// The most events a generation may send from inside `generate` (docs/backend-abi.md, "Events from inside
    /// generate"): the host accepts this many before its consumer reads any, whatever the hosting.
    static let immediateEventLimit = 64

    /// The most events `steps` can send, terminal and automatic usage included, when none of them waits: nil when
    /// a step may wait (`delay_ms` > 0, `hang`), depends on the input's size (`echo`), or breaks the contract on
    /// purpose (`no_terminal`, `after_terminal`), or when the count passes `immediateEventLimit`.
    ///
    /// A model whose answer has a count here is played inside `generate` (`ScriptedInstance`): it has every event
    /// at hand, so a worker thread would only add a hand-off.
    static func immediateEventCount(of steps: [ScriptStep]) -> Int? {
        // +2: the automatic USAGE and the terminal event.
        guard let count = eventCount(of: steps), count + 2 <= immediateEventLimit else { return nil }
        return count + 2
    }

    private static func eventCount(of steps: [ScriptStep]) -> Int? {
        var total = 0
        for step in steps {
            guard let count = step.eventCount else { return nil }
            total += count
            if total > immediateEventLimit { return nil }
        }
        return total
    }

    /// Events this step sends without waiting, or nil (see `immediateEventCount(of:)`).
    private var eventCount: Int? {
        switch self {
        case .text, .reasoningText, .reasoningState, .usage: return 1
        case .error, .finish: return 0
        case .delay(let milliseconds): return milliseconds > 0 ? nil : 0
        case .toolCall(let call): return 2 + max(1, call.chunks)
        case .json(_, let chunks): return chunks
        case .repeated(let count, let steps):
            guard let inner = Self.eventCount(of: steps) else { return nil }
            let (total, overflow) = count.multipliedReportingOverflow(by: inner)
            return overflow ? nil : total
        case .conditional(_, let then, let otherwise):
            guard let first = Self.eventCount(of: then), let second = Self.eventCount(of: otherwise) else { return nil }
            return max(first, second)
        case .echo, .hang, .noTerminal, .afterTerminal: return nil
        }
    }
}
