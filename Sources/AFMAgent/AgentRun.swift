// SPDX-License-Identifier: Apache-2.0

/// A turn in progress: the events it reports (iterate once), the channel through which the host answers
/// external tool calls, and cancellation.
///
/// ```swift
/// let run = agent.run("Open the door")
/// for await event in run {
///     if case .toolCallRequested(let call) = event { run.submit(.text("opened"), for: call.callID) }
/// }
/// let response = try await run.response()
/// ```
///
/// Events are buffered: a host that never iterates still gets its ``response()``.
public final class AgentRun: AsyncSequence, Sendable {
    public typealias Element = AgentEvent
    public typealias AsyncIterator = AsyncStream<AgentEvent>.Iterator

    private let events: AsyncStream<AgentEvent>
    let control: TurnControl
    let outcome: TurnOutcome

    init(events: AsyncStream<AgentEvent>, control: TurnControl, outcome: TurnOutcome) {
        self.events = events
        self.control = control
        self.outcome = outcome
    }

    public func makeAsyncIterator() -> AsyncStream<AgentEvent>.Iterator {
        events.makeAsyncIterator()
    }

    /// Answers an external tool call (the `callID` of a ``AgentEvent/toolCallRequested(_:)`` event). Returns
    /// false when no call with that id is waiting (answered already, timed out, or the turn ended).
    @discardableResult
    public func submit(_ output: AgentToolOutput, for callID: String) -> Bool {
        control.submit(output, for: callID)
    }

    /// Cancels the turn: waiting external calls and running handlers are cancelled, the history is rolled back,
    /// and the turn ends with ``AgentEvent/failed(_:)`` `cancelled`. A turn still waiting in the agent's queue
    /// never starts.
    public func cancel() {
        control.cancel()
    }

    /// Waits for the end of the turn: its response, or the error it failed with.
    public func response() async throws(AgentError) -> AgentResponse {
        try await outcome.wait().get()
    }
}
