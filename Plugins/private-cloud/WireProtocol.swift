// SPDX-License-Identifier: Apache-2.0

/// The API an upstream speaks.
enum WireProtocol: String, Sendable, Hashable {
    /// `POST <base>/responses` (OpenAI Responses, streamed as typed SSE events).
    case responses
    /// `POST <base>/chat/completions` (OpenAI Chat Completions, streamed as `chat.completion.chunk`s).
    case chatCompletions = "chat-completions"

    /// The path appended to the upstream's base URL for a generation.
    var path: String {
        switch self {
        case .responses: "/responses"
        case .chatCompletions: "/chat/completions"
        }
    }
}
