// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit

/// One step of a scripted model's answer, executed in order by a `StepPlayer`.
///
/// The JSON spelling of each case is given in its comment; every step is an object with exactly one of these keys
/// (`repeat` comes with `steps`), plus an optional free-form `comment`. See docs/backend-abi.md, "Scripted backend".
indirect enum ScriptStep: Sendable, Hashable {
    /// `{"text":"Hello"}`: one `TEXT_DELTA`, counted as one output token.
    case text(String)
    /// `{"echo":true}`: the last user message's text, one word (with its leading whitespace) per `TEXT_DELTA`.
    case echo
    /// `{"json":{"text":"{\"city\":\"Paris\"}","chunks":3}}`: a structured answer, as `chunks` `TEXT_DELTA`s (each
    /// one output token). The text is played as written — valid or not — so tests can check what the host does
    /// with a backend's invalid JSON.
    case json(text: String, chunks: Int)
    /// `{"delay_ms":50}`: waits, waking at once on cancel.
    case delay(milliseconds: Int)
    /// `{"repeat":N,"steps":[…]}`: plays `steps` N times.
    case repeated(count: Int, steps: [ScriptStep])
    /// `{"if_input_has":"function_call_output","then":[…],"else":[…]}`: plays `then` when the request's `input`
    /// has an item of that `type` (`"at_least":N`: N such items), otherwise `else` (either may be absent: no steps).
    /// So one model can call a tool on the first turn and answer once the tool's output comes back, as agent loops
    /// need. `{"if_tools_offered":true,"then":[…],"else":[…]}` plays `then` when the request offers any tool.
    case conditional(Condition, then: [ScriptStep], else: [ScriptStep])
    /// `{"tool_call":{"name":…,"call_id":…,"arguments":…,"chunks":N}}`: BEGIN, N ARGUMENTS deltas, END.
    case toolCall(ToolCall)
    /// `{"reasoning_text":"…"}`: one `REASONING_TEXT`.
    case reasoningText(String)
    /// `{"reasoning_state":"…"}`: one `REASONING_STATE` whose bytes are the UTF-8 of the string.
    case reasoningState(String)
    /// `{"usage":{…}}`: one `USAGE` with these numbers; the automatic usage event is then not sent.
    case usage(Usage)
    /// `{"error":{"code":"rate_limited","message":"…"}}`: terminal `ERROR`.
    case error(code: afm_status, message: String)
    /// `{"finish":"stop"|"length"|"tool_calls"}`: terminal `DONE`.
    case finish(afm_finish_reason)
    /// `{"no_terminal":true}`: ends the generation thread without any terminal event (a deliberate contract breach).
    case noTerminal
    /// `{"after_terminal":[…]}`: steps to emit *after* the terminal event (a deliberate contract breach).
    case afterTerminal([ScriptStep])
    /// `{"hang":true}`: waits until cancelled, then `DONE`/`CANCELLED`.
    case hang

    /// What a conditional step tests in the request.
    enum Condition: Sendable, Hashable {
        /// At least `count` items of `input` have this `type`.
        case inputHas(type: String, count: Int)
        /// The request offers at least one tool.
        case toolsOffered
    }

    /// A scripted tool call.
    struct ToolCall: Sendable, Hashable {
        /// The function name (`TOOL_CALL_BEGIN.name`).
        var name: String
        /// The call id (`TOOL_CALL_BEGIN.text`); nil means "call_<request_id>_<index>".
        var callID: String?
        /// The JSON arguments text, streamed in `chunks` pieces.
        var arguments: String
        /// How many `TOOL_CALL_ARGUMENTS` deltas to split `arguments` into (fewer if it has fewer characters).
        var chunks: Int
    }

    /// Explicit token counts for a `usage` step; a missing field is 0, and -1 means "unknown".
    struct Usage: Sendable, Hashable {
        var inputTokens: Int64 = 0
        var outputTokens: Int64 = 0
        var reasoningTokens: Int64 = 0
        var cachedTokens: Int64 = 0
    }

    /// Limits that keep a hostile or mistaken script from overflowing an integer or the stack.
    enum Limits {
        static let maximumDepth = 32
        static let maximumRepeat = 1_000_000
        static let maximumDelayMilliseconds = 3_600_000
        static let maximumChunks = 1_000_000
    }

    /// A problem in a script, located by a path such as `models[0].steps[2].tool_call`.
    struct ParseError: Error, Sendable {
        var path: String
        var problem: String
    }

    /// Parses a list of steps.
    ///
    /// - Parameters:
    ///   - value: The JSON value that should be an array of step objects.
    ///   - path: Where `value` sits in the script, for error messages.
    ///   - depth: How many `repeat`/`if_input_has`/`after_terminal` levels enclose it.
    static func parseList(_ value: Any?, at path: String, depth: Int = 0) throws(ParseError) -> [ScriptStep] {
        guard depth <= Limits.maximumDepth else {
            throw ParseError(path: path, problem: "steps are nested more than \(Limits.maximumDepth) levels deep")
        }
        guard let items = JSON.array(value) else {
            throw ParseError(path: path, problem: "must be an array of step objects")
        }
        var steps: [ScriptStep] = []
        steps.reserveCapacity(items.count)
        for (index, item) in items.enumerated() {
            steps.append(try ScriptStep(parsing: item, at: "\(path)[\(index)]", depth: depth))
        }
        return steps
    }

    /// Parses one step object.
    init(parsing value: Any, at path: String, depth: Int) throws(ParseError) {
        guard var object = JSON.object(value) else {
            throw ParseError(path: path, problem: "a step must be a JSON object")
        }
        object["comment"] = nil
        if object["repeat"] != nil {
            guard object.count == 2, object["steps"] != nil else {
                throw ParseError(path: path, problem: "a repeat step has exactly the keys \"repeat\" and \"steps\"")
            }
            guard let count = JSON.int(object["repeat"]), (0...Limits.maximumRepeat).contains(count) else {
                throw ParseError(path: path, problem: "\"repeat\" must be an integer from 0 to \(Limits.maximumRepeat)")
            }
            self = .repeated(
                count: count, steps: try ScriptStep.parseList(object["steps"], at: path + ".steps", depth: depth + 1))
            return
        }
        if object["if_input_has"] != nil || object["if_tools_offered"] != nil {
            let condition: Condition
            if object["if_input_has"] != nil {
                try Self.checkKeys(object, allowed: ["if_input_has", "at_least", "then", "else"], at: path)
                let type = try Self.string(object["if_input_has"], at: path + ".if_input_has")
                guard !type.isEmpty else { throw ParseError(path: path + ".if_input_has", problem: "must not be empty") }
                var count = 1
                if !JSON.isNullOrMissing(object["at_least"]) {
                    guard let value = JSON.int(object["at_least"]), (1...Limits.maximumRepeat).contains(value) else {
                        throw ParseError(
                            path: path + ".at_least", problem: "must be an integer from 1 to \(Limits.maximumRepeat)")
                    }
                    count = value
                }
                condition = .inputHas(type: type, count: count)
            } else {
                try Self.checkKeys(object, allowed: ["if_tools_offered", "then", "else"], at: path)
                try Self.requireTrue(object["if_tools_offered"], at: path + ".if_tools_offered")
                condition = .toolsOffered
            }
            var branches: [String: [ScriptStep]] = [:]
            for branch in ["then", "else"] where object[branch] != nil {
                branches[branch] = try ScriptStep.parseList(object[branch], at: "\(path).\(branch)", depth: depth + 1)
            }
            self = .conditional(condition, then: branches["then"] ?? [], else: branches["else"] ?? [])
            return
        }
        guard object.count == 1, let (key, argument) = object.first else {
            let keys = object.keys.sorted().joined(separator: ", ")
            throw ParseError(path: path, problem: "a step has exactly one key, found \(object.count) (\(keys))")
        }
        let here = "\(path).\(key)"
        switch key {
        case "text":
            self = .text(try Self.string(argument, at: here))
        case "echo":
            try Self.requireTrue(argument, at: here)
            self = .echo
        case "delay_ms":
            guard let milliseconds = JSON.int(argument), (0...Limits.maximumDelayMilliseconds).contains(milliseconds)
            else {
                throw ParseError(
                    path: here, problem: "must be an integer from 0 to \(Limits.maximumDelayMilliseconds)")
            }
            self = .delay(milliseconds: milliseconds)
        case "tool_call":
            self = .toolCall(try Self.toolCall(argument, at: here))
        case "json":
            guard let json = JSON.object(argument) else {
                throw ParseError(path: here, problem: "must be an object {\"text\":…,\"chunks\":N}")
            }
            try Self.checkKeys(json, allowed: ["text", "chunks"], at: here)
            let text = try Self.string(json["text"], at: here + ".text")
            self = .json(text: text, chunks: try Self.chunks(json["chunks"], at: here + ".chunks"))
        case "reasoning_text":
            self = .reasoningText(try Self.string(argument, at: here))
        case "reasoning_state":
            self = .reasoningState(try Self.string(argument, at: here))
        case "usage":
            self = .usage(try Self.usage(argument, at: here))
        case "error":
            guard let error = JSON.object(argument) else {
                throw ParseError(path: here, problem: "must be an object {\"code\":…,\"message\":…}")
            }
            try Self.checkKeys(error, allowed: ["code", "message"], at: here)
            let name = try Self.string(error["code"], at: here + ".code")
            guard let code = ErrorCodeName.errorCode(named: name) else {
                let names = ErrorCodeName.errorCodes.map(\.name).joined(separator: ", ")
                throw ParseError(path: here + ".code", problem: "unknown error code \"\(name)\" (one of \(names))")
            }
            let message = JSON.isNullOrMissing(error["message"]) ? name : try Self.string(error["message"], at: here)
            self = .error(code: code, message: message)
        case "finish":
            let name = try Self.string(argument, at: here)
            guard let reason = ErrorCodeName.finishReason(named: name) else {
                throw ParseError(path: here, problem: "must be \"stop\", \"length\" or \"tool_calls\", not \"\(name)\"")
            }
            self = .finish(reason)
        case "no_terminal":
            try Self.requireTrue(argument, at: here)
            self = .noTerminal
        case "after_terminal":
            self = .afterTerminal(try ScriptStep.parseList(argument, at: here, depth: depth + 1))
        case "hang":
            try Self.requireTrue(argument, at: here)
            self = .hang
        case "steps":
            throw ParseError(path: path, problem: "\"steps\" needs \"repeat\"")
        case "then", "else":
            throw ParseError(path: path, problem: "\"\(key)\" needs \"if_input_has\" or \"if_tools_offered\"")
        default:
            throw ParseError(path: path, problem: "unknown step \"\(key)\"")
        }
    }

    // MARK: - Field parsers

    private static func string(_ value: Any?, at path: String) throws(ParseError) -> String {
        guard let string = JSON.string(value) else { throw ParseError(path: path, problem: "must be a string") }
        return string
    }

    private static func requireTrue(_ value: Any?, at path: String) throws(ParseError) {
        guard JSON.bool(value) == true else { throw ParseError(path: path, problem: "must be true") }
    }

    private static func checkKeys(_ object: [String: Any], allowed: Set<String>, at path: String) throws(ParseError) {
        if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) && $0 != "comment" }) {
            throw ParseError(path: path, problem: "unknown key \"\(unknown)\"")
        }
    }

    private static func toolCall(_ value: Any?, at path: String) throws(ParseError) -> ToolCall {
        guard let object = JSON.object(value) else { throw ParseError(path: path, problem: "must be an object") }
        try checkKeys(object, allowed: ["name", "call_id", "arguments", "chunks"], at: path)
        let name = try string(object["name"], at: path + ".name")
        guard !name.isEmpty else { throw ParseError(path: path + ".name", problem: "must not be empty") }
        let callID =
            JSON.isNullOrMissing(object["call_id"]) ? nil : try string(object["call_id"], at: path + ".call_id")
        let arguments =
            JSON.isNullOrMissing(object["arguments"]) ? "{}" : try string(object["arguments"], at: path + ".arguments")
        return ToolCall(
            name: name, callID: callID, arguments: arguments, chunks: try chunks(object["chunks"], at: path + ".chunks"))
    }

    /// A `chunks` count: absent/null → 1, else an integer from 1 to `Limits.maximumChunks`.
    private static func chunks(_ value: Any?, at path: String) throws(ParseError) -> Int {
        if JSON.isNullOrMissing(value) { return 1 }
        guard let count = JSON.int(value), (1...Limits.maximumChunks).contains(count) else {
            throw ParseError(path: path, problem: "must be an integer from 1 to \(Limits.maximumChunks)")
        }
        return count
    }

    private static func usage(_ value: Any?, at path: String) throws(ParseError) -> Usage {
        guard let object = JSON.object(value) else { throw ParseError(path: path, problem: "must be an object") }
        let fields = ["input_tokens", "output_tokens", "reasoning_tokens", "cached_tokens"]
        try checkKeys(object, allowed: Set(fields), at: path)
        var numbers: [Int64] = []
        for field in fields {
            guard let raw = object[field] else {
                numbers.append(0)
                continue
            }
            guard let number = JSON.int(raw), number >= -1 else {
                throw ParseError(path: "\(path).\(field)", problem: "must be an integer ≥ -1 (-1 = unknown)")
            }
            numbers.append(Int64(number))
        }
        return Usage(
            inputTokens: numbers[0], outputTokens: numbers[1], reasoningTokens: numbers[2], cachedTokens: numbers[3])
    }
}
