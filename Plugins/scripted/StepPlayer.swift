// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit

/// Plays a model's steps for one generation on that generation's thread, turning them into events.
///
/// ```
///  steps ─► play ─► outcome ─► USAGE (unless a usage step ran) ─► DONE | ERROR ─► after_terminal steps
///              │ cancel() or emit() ≠ 0 between steps ──► DONE/CANCELLED
///              │ max_output_tokens TEXT_DELTAs sent   ──► DONE/LENGTH
///              └ no_terminal                           ──► (nothing: the thread just ends)
/// ```
///
/// Every terminal event is recorded (`terminal`) *before* it is emitted, so a test that has seen the terminal event
/// also finds its record in the file.
struct StepPlayer {
    /// How a generation ends.
    enum Outcome: Equatable {
        case done(afm_finish_reason)
        case error(afm_status, String)
        case noTerminal
    }

    private let generation: Generation
    private let records: RecordLog
    private let maxOutputTokens: Int
    private var outputTokens = 0
    private var reasoningSteps = 0
    private var toolCalls = 0
    private var explicitUsage = false
    private var clientGone = false
    private var afterTerminal: [ScriptStep] = []

    init(generation: Generation, records: RecordLog) {
        self.generation = generation
        self.records = records
        self.maxOutputTokens = generation.request.maxOutputTokens ?? generation.model.maxOutputTokens
    }

    /// Plays the model's steps, sends the terminal event, then any `after_terminal` steps.
    mutating func run() {
        let outcome =
            play(generation.model.steps) ?? .done(toolCalls > 0 ? AFM_FINISH_TOOL_CALLS : AFM_FINISH_STOP)
        finish(outcome)
        if outcome != .noTerminal { playAfterTerminal(afterTerminal) }
    }

    // MARK: - Playing

    /// Plays `steps`; returns the outcome if one of them ended the generation.
    private mutating func play(_ steps: [ScriptStep]) -> Outcome? {
        for step in steps {
            if let stop = stopRequested() { return stop }
            if let outcome = perform(step) { return outcome }
        }
        return nil
    }

    private mutating func perform(_ step: ScriptStep) -> Outcome? {
        switch step {
        case .text(let text):
            return sendText(text)
        case .echo:
            for word in Self.words(of: generation.request.lastUserText) {
                if let stop = stopRequested() { return stop }
                if let outcome = sendText(word) { return outcome }
            }
        case .json(let text, let chunks):
            for piece in Self.split(text, into: chunks) {
                if let stop = stopRequested() { return stop }
                if let outcome = sendText(piece) { return outcome }
            }
        case .delay(let milliseconds):
            generation.sleep(milliseconds: milliseconds)
        case .repeated(let count, let steps):
            for _ in 0..<count {
                if let stop = stopRequested() { return stop }
                if let outcome = play(steps) { return outcome }
            }
        case .conditional(let condition, let then, let otherwise):
            return play(generation.request.satisfies(condition) ? then : otherwise)
        case .toolCall(let call):
            let index = Int32(clamping: toolCalls)
            toolCalls += 1
            let callID = call.callID ?? "call_\(generation.requestID)_\(index)"
            if let stop = send(AFM_EVENT_TOOL_CALL_BEGIN, index: index, text: callID, name: call.name) { return stop }
            for piece in Self.split(call.arguments, into: call.chunks) {
                if let stop = stopRequested() { return stop }
                if let stop = send(AFM_EVENT_TOOL_CALL_ARGUMENTS, index: index, text: piece) { return stop }
            }
            if let stop = send(AFM_EVENT_TOOL_CALL_END, index: index) { return stop }
        case .reasoningText(let text):
            reasoningSteps += 1
            return send(AFM_EVENT_REASONING_TEXT, text: text)
        case .reasoningState(let state):
            return send(AFM_EVENT_REASONING_STATE, text: state)
        case .usage(let usage):
            explicitUsage = true
            return send(AFM_EVENT_USAGE, usage: Self.eventUsage(usage))
        case .error(let code, let message):
            return .error(code, message)
        case .finish(let reason):
            return .done(reason)
        case .noTerminal:
            return .noTerminal
        case .afterTerminal(let steps):
            afterTerminal += steps
        case .hang:
            generation.waitUntilCancelled()
            return .done(AFM_FINISH_CANCELLED)
        }
        return nil
    }

    /// DONE/CANCELLED once `cancel()` was called or the host refused an event.
    private func stopRequested() -> Outcome? {
        generation.isCancelled || clientGone ? .done(AFM_FINISH_CANCELLED) : nil
    }

    /// One TEXT_DELTA (one output token), honouring max_output_tokens.
    private mutating func sendText(_ text: String) -> Outcome? {
        if outputTokens >= maxOutputTokens { return .done(AFM_FINISH_LENGTH) }
        // The host copied the event even when it answers "stop", so it counts as output either way.
        let stop = send(AFM_EVENT_TEXT_DELTA, text: text)
        outputTokens += 1
        if let stop { return stop }
        return outputTokens >= maxOutputTokens ? .done(AFM_FINISH_LENGTH) : nil
    }

    /// Emits a non-terminal event; a non-zero `emit` return records `client_gone` and ends with DONE/CANCELLED.
    private mutating func send(
        _ type: afm_event_type, index: Int32 = 0, text: String = "", name: String = "",
        usage: EventSink.Usage = .unknown
    ) -> Outcome? {
        if generation.sink.emit(type, index: index, text: text, name: name, usage: usage) { return nil }
        if !clientGone {
            clientGone = true
            records.append(
                "client_gone", requestID: generation.requestID,
                [("after_cancel", generation.isCancelled ? "true" : "false")])
        }
        return .done(AFM_FINISH_CANCELLED)
    }

    // MARK: - Ending

    /// Sends the automatic USAGE (unless a usage step ran) and the terminal event, recording it first.
    private mutating func finish(_ outcome: Outcome) {
        let sink = generation.sink
        let id = generation.requestID
        switch outcome {
        case .noTerminal:
            records.append("no_terminal", requestID: id)
            return
        case .done, .error:
            break
        }
        if !explicitUsage {
            let usage = EventSink.Usage(
                inputTokens: Int64(clamping: generation.request.inputTokens), outputTokens: Int64(outputTokens),
                reasoningTokens: Int64(reasoningSteps), cachedTokens: 0)
            sink.emit(AFM_EVENT_USAGE, usage: usage)
        }
        switch outcome {
        case .done(let reason):
            records.append(
                "terminal", requestID: id,
                [("kind", "\"done\""), ("reason", JSON.quote(ErrorCodeName.name(ofFinish: reason)))])
            sink.emit(AFM_EVENT_DONE, code: reason)
        case .error(let code, let message):
            records.append(
                "terminal", requestID: id,
                [
                    ("kind", "\"error\""), ("reason", JSON.quote(ErrorCodeName.name(ofError: code))),
                    ("message", JSON.quote(message)),
                ])
            sink.emit(AFM_EVENT_ERROR, code: code, text: message)
        case .noTerminal:
            break
        }
    }

    /// Emits `after_terminal` steps verbatim: no caps, no terminal logic, `emit` results ignored. Control steps
    /// (`no_terminal`, `hang`, nested `after_terminal`) do nothing here; a cancel stops the playback.
    private func playAfterTerminal(_ steps: [ScriptStep]) {
        let sink = generation.sink
        for step in steps {
            if generation.isCancelled { return }
            switch step {
            case .text(let text): sink.emit(AFM_EVENT_TEXT_DELTA, text: text)
            case .echo:
                for word in Self.words(of: generation.request.lastUserText) {
                    sink.emit(AFM_EVENT_TEXT_DELTA, text: word)
                }
            case .json(let text, let chunks):
                for piece in Self.split(text, into: chunks) { sink.emit(AFM_EVENT_TEXT_DELTA, text: piece) }
            case .delay(let milliseconds): generation.sleep(milliseconds: milliseconds)
            case .repeated(let count, let inner):
                for _ in 0..<count where !generation.isCancelled { playAfterTerminal(inner) }
            case .conditional(let condition, let then, let otherwise):
                playAfterTerminal(generation.request.satisfies(condition) ? then : otherwise)
            case .toolCall(let call):
                sink.emit(AFM_EVENT_TOOL_CALL_BEGIN, index: 0, text: call.callID ?? "", name: call.name)
                for piece in Self.split(call.arguments, into: call.chunks) {
                    sink.emit(AFM_EVENT_TOOL_CALL_ARGUMENTS, text: piece)
                }
                sink.emit(AFM_EVENT_TOOL_CALL_END)
            case .reasoningText(let text): sink.emit(AFM_EVENT_REASONING_TEXT, text: text)
            case .reasoningState(let state): sink.emit(AFM_EVENT_REASONING_STATE, text: state)
            case .usage(let usage): sink.emit(AFM_EVENT_USAGE, usage: Self.eventUsage(usage))
            case .error(let code, let message): sink.emit(AFM_EVENT_ERROR, code: code, text: message)
            case .finish(let reason): sink.emit(AFM_EVENT_DONE, code: reason)
            case .noTerminal, .afterTerminal, .hang: continue
            }
        }
    }

    // MARK: - Text helpers

    /// Splits text into words that keep their leading whitespace: "Hello big  world" → "Hello", " big", "  world".
    /// Concatenating the pieces gives the text back.
    static func words(of text: String) -> [String] {
        var pieces: [String] = []
        var current = ""
        var inWord = false
        for character in text {
            if character.isWhitespace {
                if inWord {
                    pieces.append(current)
                    current = ""
                    inWord = false
                }
            } else {
                inWord = true
            }
            current.append(character)
        }
        if !current.isEmpty { pieces.append(current) }
        return pieces
    }

    /// Splits text into at most `count` nearly equal pieces at character boundaries (no empty pieces).
    static func split(_ text: String, into count: Int) -> [String] {
        let characters = Array(text)
        let pieces = min(max(count, 1), characters.count)
        guard pieces > 0 else { return [] }
        return (0..<pieces).map { piece in
            String(characters[piece * characters.count / pieces..<(piece + 1) * characters.count / pieces])
        }
    }

    private static func eventUsage(_ usage: ScriptStep.Usage) -> EventSink.Usage {
        EventSink.Usage(
            inputTokens: usage.inputTokens, outputTokens: usage.outputTokens,
            reasoningTokens: usage.reasoningTokens, cachedTokens: usage.cachedTokens)
    }
}
