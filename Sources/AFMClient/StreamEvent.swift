// SPDX-License-Identifier: Apache-2.0
import AFMJSON

/// What a client takes from a Responses event stream (the chat shows text; an agent also runs the tool calls).
public enum StreamEvent: Sendable, Hashable {
    /// `response.created`: the model that answers.
    case started(model: String)
    /// `response.output_text.delta`.
    case textDelta(String)
    /// `response.output_item.done`: a finished output item (`message`, `function_call`, `reasoning`, …) as the
    /// gateway sent it, to replay in a later request's `input`.
    case outputItem(JSONValue)
    /// The `usage` of the finished response; comes just before `completed`, `incomplete` or `failed`.
    case usage(ResponseUsage)
    /// `response.completed`.
    case completed
    /// `response.incomplete` with its reason (`max_output_tokens`, …).
    case incomplete(reason: String)
    /// An `error` event, `response.failed`, an HTTP error answer, or a connection lost before the end.
    case failed(code: String, message: String)
}
