// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMJSON

/// The JSON the web chat's API sends: conversations, messages, search hits and images.
enum WebChatJSON {
    static func conversation(_ summary: ConversationSummary) -> JSONValue {
        [
            "id": .string(summary.id),
            "title": .string(summary.title),
            "created_at": .number(JSONNumber(summary.createdAt)),
            "updated_at": .number(JSONNumber(summary.updatedAt)),
            "message_count": .number(JSONNumber(summary.messageCount)),
            "preview": .string(summary.preview),
            "draft": .string(summary.draft),
        ]
    }

    static func image(_ image: ImageReference) -> JSONValue {
        [
            "hash": .string(image.hash),
            "mime_type": .string(image.mimeType),
            "width": .number(JSONNumber(image.width)),
            "height": .number(JSONNumber(image.height)),
            "byte_count": .number(JSONNumber(image.byteCount)),
        ]
    }

    static func message(_ message: ChatMessage) -> JSONValue {
        var object: JSONObject = [
            "id": .string(message.id),
            "conversation_id": .string(message.conversationID),
            "sequence": .number(JSONNumber(message.sequence)),
            "author": .string(message.author.rawValue),
            "state": .string(message.state.rawValue),
            "created_at": .number(JSONNumber(message.createdAt)),
            "model": message.model.map(JSONValue.string) ?? .null,
            "notice": message.notice.map(JSONValue.string) ?? .null,
            "text": .string(message.text),
            "images": .array(message.images.map(image)),
        ]
        if let usage = message.usage {
            object["usage"] = [
                "input_tokens": .number(JSONNumber(usage.inputTokens)),
                "output_tokens": .number(JSONNumber(usage.outputTokens)),
            ]
        } else {
            object["usage"] = .null
        }
        return .object(object)
    }

    static func hit(_ hit: SearchHit) -> JSONValue {
        [
            "conversation_id": .string(hit.conversationID),
            "title": .string(hit.title),
            "sequence": hit.sequence.map { .number(JSONNumber($0)) } ?? .null,
            "snippet": .string(hit.snippet),
        ]
    }
}
