// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMJSON

/// The one request the pipeline serves, whatever API dialect it came in: the conversation, the tools and the
/// sampling settings, already validated.
///
/// A dialect (Responses, Chat Completions, Anthropic Messages) only decodes its wire body into this value; the
/// budgets, truncation, capability checks, the common prompt, the generation request document and the token
/// monitor work on it alone (docs/ARCHITECTURE.md, "Dialects").
public struct PipelineRequest: Sendable {
    /// One item of the conversation, normalized.
    public enum Item: Sendable, Hashable {
        /// A user or assistant message; parts are `{"type":"text"}` or `{"type":"image"}` document parts.
        case message(role: String, parts: [JSONValue])
        case functionCall(callID: String, name: String, arguments: String, namespace: String?)
        case functionCallOutput(callID: String, output: String)
        /// A custom tool call replayed; the backend sees it as a function call with `{"input": …}`.
        case customToolCall(callID: String, name: String, input: String)
        case customToolCallOutput(callID: String, output: String)
        /// A reasoning item replayed with its sealed state (nil when the client sent none).
        case reasoning(encryptedContent: String?)
    }

    /// The dialect the request came in (for the token monitor, the ids and the log).
    public var dialect: APIDialect
    public var model: String
    /// System text in order (instructions, system and developer messages); the common prompt goes first later.
    public var system: [String]
    public var items: [Item]
    public var stream: Bool
    public var temperature: Double?
    public var topP: Double?
    /// The output cap the client asked for (nil: the model's whole output budget).
    public var maxOutputTokens: Int?
    /// The normalized tools and tool choice.
    public var toolSet: ToolSet
    public var parallelToolCalls: Bool
    /// The reasoning effort (nil when none was asked for).
    public var reasoningEffort: String?
    /// Drop the oldest complete turns until the input fits, instead of refusing.
    public var truncationAuto: Bool
    /// How many images the whole history carries.
    public var imageCount: Int
    /// Stop sequences: the answer ends before the first one the model writes (enforced by the host, so every
    /// backend honours them).
    public var stopSequences: [String]
    /// The form the answer must take: text, any JSON object, or JSON matching a schema (``OutputFormat``; each
    /// dialect decodes its own field into it: Responses `text.format`, Chat Completions `response_format`).
    public var outputFormat: OutputFormat
    /// A sampling seed (Chat Completions `seed`): with the same seed and request a backend that takes it answers
    /// the same; nil lets the backend choose. In the generation request document only when given.
    public var seed: Int?
    /// Sample only among the k most likely tokens (Messages `top_k`); nil is the backend's default. In the
    /// generation request document only when given.
    public var topK: Int?
    /// Warnings for the `x-afm-warning` response headers (dialect-specific ones added to the tool set's).
    public var extraWarnings: [String] = []

    public var warnings: [String] { toolSet.warnings + outputFormat.warnings + extraWarnings }

    public init(
        dialect: APIDialect, model: String, system: [String], items: [Item], stream: Bool, temperature: Double? = nil,
        topP: Double? = nil, maxOutputTokens: Int? = nil, toolSet: ToolSet = ToolSet(), parallelToolCalls: Bool = true,
        reasoningEffort: String? = nil, truncationAuto: Bool = false, imageCount: Int = 0, stopSequences: [String] = [],
        outputFormat: OutputFormat = .text
    ) {
        self.dialect = dialect
        self.model = model
        self.system = system
        self.items = items
        self.stream = stream
        self.temperature = temperature
        self.topP = topP
        self.maxOutputTokens = maxOutputTokens
        self.toolSet = toolSet
        self.parallelToolCalls = parallelToolCalls
        self.reasoningEffort = reasoningEffort
        self.truncationAuto = truncationAuto
        self.imageCount = imageCount
        self.stopSequences = stopSequences
        self.outputFormat = outputFormat
    }
}

/// Collects a conversation's items in order and enforces the rules every dialect shares: a tool output answers
/// an earlier call, and the conversation holds something to answer.
public struct ConversationItems: Sendable {
    public private(set) var items: [PipelineRequest.Item] = []
    private var callIDs = Set<String>()

    public init() {}

    /// Appends an item.
    ///
    /// A user message without any content part is refused in every dialect (400 `empty_array` naming its
    /// content): a turn that says nothing is a client mistake, and the dialects used to disagree (200 with an
    /// empty turn, or 400). An assistant message that says nothing (no part, or only empty text) adds nothing in
    /// every dialect: clients replay such turns (an answer that was only a tool call), and the dialects used to
    /// disagree (Chat Completions dropped it, Messages and Responses sent the backend an empty assistant turn).
    ///
    /// - Parameter outputParam: the field named in the error: a tool output's call id when it answers no earlier
    ///   call (`input[3].call_id`, `messages[2].tool_call_id`), a message's content when it is empty
    ///   (`messages[2].content`).
    public mutating func append(_ item: PipelineRequest.Item, outputParam: @autoclosure () -> String) throws(AFMError) {
        switch item {
        case .message(let role, let parts) where parts.isEmpty && role == "user":
            let param = outputParam()
            throw AFMError(
                .invalidRequest, "'\(param)' must not be empty: a user message needs at least one content part.", param: param,
                publicCode: "empty_array")
        case .message(let role, let parts) where role == "assistant" && parts.allSatisfy({ $0["type"] == "text" && $0["text"] == "" }):
            return
        case .functionCall(let callID, _, _, _), .customToolCall(let callID, _, _):
            callIDs.insert(callID)
        case .functionCallOutput(let callID, _), .customToolCallOutput(let callID, _):
            guard callIDs.contains(callID) else {
                throw AFMError(
                    .invalidRequest, "No tool call found for the output with call_id '\(callID)': every output must follow the call it answers.",
                    param: outputParam(), publicCode: "invalid_value")
            }
        default:
            break
        }
        items.append(item)
    }

    /// The items, once the conversation holds at least one user message or tool output.
    ///
    /// - Throws: 400 naming `param` when it holds neither.
    public func finished(param: String, what: String) throws(AFMError) -> [PipelineRequest.Item] {
        guard items.contains(where: {
            switch $0 {
            case .message(let role, _): role == "user"
            case .reasoning: false
            default: true
            }
        }) else {
            throw AFMError(.invalidRequest, "'\(param)' must contain at least one \(what).", param: param)
        }
        return items
    }
}
