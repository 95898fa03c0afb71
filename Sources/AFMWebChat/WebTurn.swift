// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMJSON
import AFMSystem
import Synchronization

/// One answer the web chat is streaming: it runs on a thread of its own (``AnswerRunner`` blocks in `poll(2)`),
/// saves its text through the history thread as it arrives, and hands events to the request that started it.
///
/// The answer goes on when the page that asked goes away (a reload finds it still streaming and follows it from
/// the history); only ``stop()`` (the page's Stop button, `POST /api/answers/ID/stop`) ends it early.
final class WebTurn: Sendable {
    /// What the page is sent, as Server-Sent Events.
    enum Event: Sendable {
        case notice(String)
        case started(model: String)
        case delta(String)
        case finished(ChatMessage?)
    }

    let answerID: String
    private let stopRequested = Mutex(false)

    init(answerID: String) {
        self.answerID = answerID
    }

    /// Asks the answer to stop (it ends `interrupted`, its text so far kept).
    func stop() { stopRequested.withLock { $0 = true } }

    var isStopRequested: Bool { stopRequested.withLock { $0 } }

    /// Starts the answering thread; its events arrive in the returned stream, which ends after `.finished`.
    func start(
        client: ResponsesClient, history: HistoryThread, model: String, earlier: [ChatMessage], parts: [ContentPart],
        conversationID: String, answer: ChatMessage
    ) throws -> AsyncStream<Event> {
        let (events, continuation) = AsyncStream<Event>.makeStream(bufferingPolicy: .unbounded)
        let images = history.images
        try IOThread.spawn(name: "afm-web-turn") { [self] in
            let outcome = AnswerRunner(client: client).run(
                model: model, history: earlier, parts: parts,
                imageBytes: { try images.read(hash: $0.hash, mimeType: $0.mimeType) },
                shouldStop: { self.isStopRequested },
                onNotice: { continuation.yield(.notice($0)) },
                onStarted: { continuation.yield(.started(model: $0)) },
                onDelta: { continuation.yield(.delta($0)) },
                onProgress: { text in
                    let id = answer.id
                    history.submit { store in try? store.updateAnswer(messageID: id, text: text) }
                }
            )
            let id = answer.id
            let sequence = answer.sequence
            let finished = try? history.performBlocking { store -> ChatMessage? in
                try store.finishAnswer(
                    messageID: id, text: outcome.text, state: outcome.state, model: outcome.model, notice: outcome.notice,
                    usage: outcome.usage)
                return try store.messages(conversationID: conversationID, before: sequence + 1, limit: 1).first
            }
            continuation.yield(.finished(finished ?? nil))
            continuation.finish()
        }.detach()
        return events
    }

    /// The SSE bytes of an event (`data: {…}` and a blank line).
    static func encode(_ event: Event) -> [UInt8] {
        let value: JSONValue
        switch event {
        case .notice(let text): value = ["type": "notice", "text": .string(text)]
        case .started(let model): value = ["type": "model", "model": .string(model)]
        case .delta(let text): value = ["type": "delta", "text": .string(text)]
        case .finished(let message): value = ["type": "done", "answer": message.map(WebChatJSON.message) ?? .null]
        }
        return Array("data: ".utf8) + value.encoded() + Array("\n\n".utf8)
    }
}
