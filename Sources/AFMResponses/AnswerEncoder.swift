// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON

/// How one API dialect writes the pipeline's answer on the wire: a JSON body, or stream bytes.
///
/// The pipeline (``ResponsesService``) runs the generation and feeds every backend event to the
/// ``ResponseBuilder``; an encoder only turns what the builder accepted into its dialect's bytes. It decides
/// nothing: caps, stop sequences, tool-call rules and outcomes are the builder's.
public protocol AnswerEncoder: Sendable {
    /// Whether the encoder reads the builder's Responses events (only the Responses dialect); every other
    /// encoder reads the builder's dialect-neutral ``ResponseBuilder/Step``s.
    static var readsResponsesEvents: Bool { get }

    /// The dialect, for its error envelope.
    var dialect: APIDialect { get }

    /// The bytes that open a stream, before any backend event.
    mutating func streamStart(_ builder: inout ResponseBuilder) -> [UInt8]

    /// The bytes for what one backend event changed: the Responses `events` the builder built (with
    /// ``readsResponsesEvents``), or its `steps`. After the step `.ended`, the builder's outcome is final.
    mutating func streamBytes(events: [JSONValue], steps: [ResponseBuilder.Step], builder: ResponseBuilder) -> [UInt8]

    /// The body of a non-streaming answer that did not fail (status 200).
    func body(_ builder: ResponseBuilder) -> [UInt8]
}

/// The Responses dialect's encoder: the builder's events as `event:`/`data:` frames, the response object as body.
public struct ResponsesEncoder: AnswerEncoder {
    public static let readsResponsesEvents = true
    public var dialect: APIDialect { .responses }

    public init() {}

    public mutating func streamStart(_ builder: inout ResponseBuilder) -> [UInt8] {
        ResponsesService.encode(builder.start())
    }

    public mutating func streamBytes(events: [JSONValue], steps: [ResponseBuilder.Step], builder: ResponseBuilder) -> [UInt8] {
        events.isEmpty ? [] : ResponsesService.encode(events)
    }

    public func body(_ builder: ResponseBuilder) -> [UInt8] {
        var body: [UInt8] = []
        builder.encodeResponseObject(into: &body)
        return body
    }
}

extension APIDialect {
    /// The prefix of the ids of this dialect's answers: `resp_…`, `chatcmpl-…`, `msg_…`.
    public var idPrefix: String {
        switch self {
        case .responses: "resp"
        case .chatCompletions: "chatcmpl"
        case .messages: "msg"
        }
    }

    /// The field that holds the conversation, named in budget and image errors.
    public var conversationField: String { self == .responses ? "input" : "messages" }

    /// The field that asks for reasoning, named in capability errors.
    public var reasoningField: String {
        switch self {
        case .responses: "reasoning.effort"
        case .chatCompletions: "reasoning_effort"
        case .messages: "thinking"
        }
    }

    /// The character between the prefix and the random part of an id.
    public var idSeparator: UInt8 {
        self == .chatCompletions ? UInt8(ascii: "-") : UInt8(ascii: "_")
    }
}
