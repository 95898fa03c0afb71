// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// Runs one step's tool calls (agents.md §1.5): the budget first, then every call concurrently, local ones
/// with a timeout, external ones by waiting for the host. Every failure becomes an error *output*, so the model
/// can recover and sibling calls go on.
struct ToolRuntime: Sendable {
    let tools: [String: AgentTool]
    let policy: TurnPolicy
    let control: TurnControl
    let emit: @Sendable (AgentEvent) -> Void

    init(tools: [AgentTool], policy: TurnPolicy, control: TurnControl, emit: @escaping @Sendable (AgentEvent) -> Void) {
        var byName: [String: AgentTool] = [:]
        for tool in tools where byName[tool.name] == nil { byName[tool.name] = tool }
        self.tools = byName
        self.policy = policy
        self.control = control
        self.emit = emit
    }

    /// Runs `calls` (in the model's order) with `remainingBudget` calls left (nil: unlimited); the records come
    /// back in call order. Only the tools named in `offered` (what the step offered the model) run: a call of any
    /// other tool — one the step withheld by tool mode `none` or `named`, which a backend that passes calls through
    /// may still return — gets the "unknown tool" output, as a tool the agent does not have does.
    func run(_ calls: [AgentToolCall], remainingBudget: Int?, offered: Set<String>) async -> [ToolCallRecord] {
        await withTaskGroup(of: (Int, ToolCallRecord).self) { group in
            for (index, call) in calls.enumerated() {
                if let remainingBudget, index >= remainingBudget {
                    // Refused before anything runs: the budget is checked first, in the model's order.
                    let limit = policy.maxToolCalls ?? 0
                    let record = ToolCallRecord(
                        call: call,
                        output: .error(
                            "tool call budget spent: this turn may make at most \(limit) tool calls; answer with what you have"),
                        isExternal: tools[call.name]?.isExternal ?? false, durationMilliseconds: 0)
                    emit(.toolCallCompleted(record))
                    group.addTask { (index, record) }
                    continue
                }
                group.addTask { (index, await execute(call, offered: offered)) }
            }
            var records: [(Int, ToolCallRecord)] = []
            for await record in group { records.append(record) }
            return records.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    /// One call, from its start event to its completed event.
    private func execute(_ call: AgentToolCall, offered: Set<String>) async -> ToolCallRecord {
        let clock = ContinuousClock()
        let start = clock.now
        let tool = offered.contains(call.name) ? tools[call.name] : nil
        let output: AgentToolOutput
        if let tool {
            switch parseArguments(call.arguments) {
            case .problem(let problem):
                emit(tool.isExternal ? .toolCallRequested(call) : .toolCallStarted(call))
                output = problem
            case .arguments(let arguments):
                switch tool.execution {
                case .local(let handler):
                    emit(.toolCallStarted(call))
                    output = await runLocal(call, handler: handler, arguments: arguments, timeout: tool.timeout ?? policy.toolTimeout)
                case .external:
                    output = await waitExternal(call, timeout: tool.timeout ?? policy.externalToolTimeout)
                }
            }
        } else {
            emit(.toolCallStarted(call))
            let names = offered.sorted().joined(separator: ", ")
            output = .error("unknown tool \"\(call.name)\"; the tools are: \(names.isEmpty ? "none" : names)")
        }
        let elapsed = clock.now - start
        let milliseconds = Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)
        let record = ToolCallRecord(call: call, output: output, isExternal: tool?.isExternal ?? false, durationMilliseconds: milliseconds)
        emit(.toolCallCompleted(record))
        return record
    }

    private enum ParsedArguments {
        case arguments(JSONValue)
        case problem(AgentToolOutput)
    }

    private func parseArguments(_ text: String) -> ParsedArguments {
        let trimmed = text.trimmingWhitespace()
        guard !trimmed.isEmpty else { return .arguments(.object(JSONObject())) }
        guard let value = try? JSONParser.parse(trimmed), value.objectValue != nil else {
            return .problem(.error("the arguments are not a JSON object: \(trimmed.prefix(200))"))
        }
        return .arguments(value)
    }

    /// Runs a local handler; its output, or an error output at the timeout or on cancel. The handler's task is
    /// tracked so the turn ends only after it (a handler that ignores cancellation delays the end, never the
    /// output).
    private func runLocal(
        _ call: AgentToolCall, handler: @escaping AgentTool.Handler, arguments: JSONValue, timeout: Duration
    ) async -> AgentToolOutput {
        let slot = OutputSlot()
        let name = call.name
        let work = Task {
            do {
                slot.resolve(try await handler(arguments))
            } catch is CancellationError {
                slot.resolve(.error("tool \(name) was cancelled"))
            } catch {
                slot.resolve(.error("tool \(name) failed: \(error)"))
            }
        }
        control.track(work)
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            if slot.resolve(.error("tool \(name) timed out after \(Self.seconds(timeout))")) { work.cancel() }
        }
        let output = await withTaskCancellationHandler {
            await slot.wait()
        } onCancel: {
            slot.resolve(.error("tool \(name) was cancelled: the turn was cancelled"))
            work.cancel()
        }
        timer.cancel()
        return output
    }

    /// Waits for the host's output; an error output at the timeout, on cancel or at the end of the turn.
    private func waitExternal(_ call: AgentToolCall, timeout: Duration) async -> AgentToolOutput {
        guard let slot = control.registerExternal(callID: call.callID) else {
            emit(.toolCallRequested(call))
            return .error("cancelled: the turn was cancelled")
        }
        emit(.toolCallRequested(call))
        let timer = Task {
            guard (try? await Task.sleep(for: timeout)) != nil else { return }
            if slot.resolve(.error("the host did not answer tool \(call.name) within \(Self.seconds(timeout))")) {
                control.forgetExternal(callID: call.callID)
            }
        }
        let output = await withTaskCancellationHandler {
            await slot.wait()
        } onCancel: {
            slot.resolve(.error("cancelled: the turn was cancelled"))
        }
        timer.cancel()
        return output
    }

    static func seconds(_ duration: Duration) -> String {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }
}

extension String {
    /// Without leading and trailing whitespace (Foundation-free).
    func trimmingWhitespace() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }
}
