// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import AFMCore
import AFMJSON
import AFMResponses
import Testing

/// `maximumOutputBytes`: text, tool-call names and arguments and reasoning count against one limit per
/// response; the event that would cross it fails the response (`output_limit_exceeded`) and is not kept.
@Suite struct OutputLimitBuilderTests {
    func builder(limit: Int) throws -> ResponseBuilder {
        ResponseBuilder(
            responseID: "resp_1", request: try ResponsesRequest(body: Array(#"{"model":"m","input":"hi"}"#.utf8)), model: "m",
            maxOutputTokens: 100, estimatedInputTokens: 3, createdAt: 1_760_000_000, maximumOutputBytes: limit)
    }

    @Test func textPastTheLimitFailsTheResponse() throws {
        // 100 bytes of text and the one item that holds them.
        var builder = try builder(limit: 100 + ResponseBuilder.outputItemCost)
        var events = builder.start()
        events += builder.consume(.textDelta(String(repeating: "a", count: 60)), now: 1)
        #expect(builder.outcome == nil)
        events += builder.consume(.textDelta(String(repeating: "b", count: 60)), now: 1)
        #expect(builder.exceededOutputLimit)
        guard case .failed(let error)? = builder.outcome else {
            Issue.record("the response did not fail: \(String(describing: builder.outcome))")
            return
        }
        #expect(error.publicCode == "output_limit_exceeded")
        let types = events.compactMap { $0["type"]?.stringValue }
        #expect(types.suffix(2) == ["error", "response.failed"])
        #expect(events.first { $0["type"] == "error" }?["code"] == "output_limit_exceeded")
        let final = try #require(events.last?["response"])
        #expect(final["status"] == "failed")
        #expect(final["output"]?[0]?["status"] == "incomplete")
        // The delta that crossed the limit is not kept, and later events change nothing.
        #expect(final["output"]?[0]?["content"]?[0]?["text"]?.stringValue == String(repeating: "a", count: 60))
        #expect(builder.consume(.textDelta("more"), now: 2).isEmpty)
        #expect(builder.consume(.done(.stop), now: 2).isEmpty)
    }

    @Test func toolArgumentsAndReasoningCountToo() throws {
        var calls = try builder(limit: 64)
        _ = calls.start()
        _ = calls.consume(.toolCallBegin(index: 0, name: "f", callID: "call_1"), now: 1)
        for _ in 0..<10 { _ = calls.consume(.toolCallArguments(index: 0, delta: "0123456789"), now: 1) }
        #expect(calls.exceededOutputLimit)

        var thoughts = try builder(limit: 64)
        _ = thoughts.start()
        for _ in 0..<10 { _ = thoughts.consume(.reasoningText("0123456789"), now: 1) }
        #expect(thoughts.exceededOutputLimit)

        var state = try builder(limit: 64)
        _ = state.start()
        _ = state.consume(.reasoningState(Array(repeating: 7, count: 65)), now: 1)
        #expect(state.exceededOutputLimit)

        // 64 bytes of text and the one item that holds them.
        var fits = try builder(limit: 64 + ResponseBuilder.outputItemCost)
        _ = fits.start()
        _ = fits.consume(.textDelta(String(repeating: "a", count: 64)), now: 1)
        _ = fits.consume(.done(.stop), now: 1)
        #expect(fits.outcome == .completed)
    }

    /// Each output item costs a fixed amount (`ResponseBuilder.outputItemCost`) besides its text: tool calls with
    /// an empty name and call id, or text and reasoning that alternate a byte at a time, open a new item (and
    /// send events) for almost nothing, and must not grow the response past the limit.
    @Test func manyEmptyItemsCountAgainstTheLimit() throws {
        var calls = try builder(limit: 1024)
        _ = calls.start()
        var events = 0
        for index in 0..<10_000 where !calls.exceededOutputLimit {
            events += calls.consume(.toolCallBegin(index: index, name: "", callID: ""), now: 1).count
        }
        #expect(calls.exceededOutputLimit)
        #expect(events < 64, "\(events) events before the limit")
        guard case .failed(let error)? = calls.outcome else {
            Issue.record("the response did not fail: \(String(describing: calls.outcome))")
            return
        }
        #expect(error.publicCode == "output_limit_exceeded")

        var alternating = try builder(limit: 1024)
        _ = alternating.start()
        for step in 0..<10_000 where !alternating.exceededOutputLimit {
            _ = alternating.consume(step.isMultiple(of: 2) ? .textDelta("a") : .reasoningText("b"), now: 1)
        }
        #expect(alternating.exceededOutputLimit)
    }

    /// Usage the backend reports after the limit ended the response (it reports it while stopping) still counts,
    /// so the token monitor and the quota see what the generation cost.
    @Test func usageAfterTheLimitIsCounted() throws {
        var builder = try builder(limit: 10)
        _ = builder.start()
        _ = builder.consume(.textDelta(String(repeating: "a", count: 20)), now: 1)
        #expect(builder.exceededOutputLimit)
        #expect(builder.consume(.usage(BackendUsage(inputTokens: 7, outputTokens: 321)), now: 2).isEmpty)
        #expect(builder.usageCounts.output == 321)
        #expect(builder.usageCounts.input == 7)
    }
}
