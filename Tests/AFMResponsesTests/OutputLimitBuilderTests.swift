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
        var builder = try builder(limit: 100)
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

        var fits = try builder(limit: 64)
        _ = fits.start()
        _ = fits.consume(.textDelta(String(repeating: "a", count: 64)), now: 1)
        _ = fits.consume(.done(.stop), now: 1)
        #expect(fits.outcome == .completed)
    }
}
