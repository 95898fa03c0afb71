// SPDX-License-Identifier: Apache-2.0

/// What the chat client takes from a Responses event stream.
public enum StreamEvent: Sendable, Hashable {
    /// `response.created`: the model that answers.
    case started(model: String)
    /// `response.output_text.delta`.
    case textDelta(String)
    /// `response.completed`.
    case completed
    /// `response.incomplete` with its reason (`max_output_tokens`, …).
    case incomplete(reason: String)
    /// An `error` event, `response.failed`, an HTTP error answer, or a connection lost before the end.
    case failed(code: String, message: String)
}
