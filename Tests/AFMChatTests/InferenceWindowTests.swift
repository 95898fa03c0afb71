// SPDX-License-Identifier: Apache-2.0
import AFMChat
import Testing

@Suite struct InferenceWindowTests {
    private func message(_ sequence: Int, _ author: MessageAuthor, _ state: MessageState = .complete, images: Int = 0) -> ChatMessage {
        let image = ImageReference(hash: "h\(sequence)", mimeType: "image/png", width: 1, height: 1, byteCount: 1)
        return ChatMessage(
            id: "\(sequence)", conversationID: "c", sequence: Int64(sequence), author: author, state: state, createdAt: 0,
            parts: [.text("t\(sequence)")] + Array(repeating: .image(image), count: images)
        )
    }

    @Test func onlyCompleteTurnsAreSent() throws {
        let history = [
            message(0, .user), message(1, .assistant), message(2, .user), message(3, .assistant, .interrupted),
            message(4, .user), message(5, .assistant, .failed), message(6, .user), message(7, .assistant, .incomplete),
            message(8, .user), message(9, .assistant),
        ]
        let window = try InferenceWindow.select(history: history, currentImageCount: 0)
        #expect(window.turns.map(\.user.sequence) == [0, 8])
        #expect(window.omittedTurnCount == 0 && window.notice == nil)
    }

    @Test func atMostEightyMessagesAndANotice() throws {
        let history = (0..<200).map { message($0, $0 % 2 == 0 ? .user : .assistant) }
        let window = try InferenceWindow.select(history: history, currentImageCount: 0)
        #expect(window.turns.count * 2 + 1 <= InferenceWindow.maximumMessages)
        #expect(window.turns.last?.answer.sequence == 199)
        #expect(window.omittedTurnCount == 100 - window.turns.count)
        #expect(window.notice?.contains("left out") == true)
    }

    @Test func imagesLimitTheContiguousSuffix() throws {
        let history = [
            message(0, .user, images: 1), message(1, .assistant), message(2, .user, images: 2), message(3, .assistant),
            message(4, .user), message(5, .assistant), message(6, .user, images: 1), message(7, .assistant),
        ]
        let window = try InferenceWindow.select(history: history, currentImageCount: 1)
        #expect(window.turns.map(\.user.sequence) == [2, 4, 6])  // 1 + 1 + 2 = 4; turn 0 would make 5
        #expect(try InferenceWindow.select(history: history, currentImageCount: 4).turns.isEmpty)  // turn 6 has an image
        #expect(throws: HistoryError.self) { try InferenceWindow.select(history: [], currentImageCount: 5) }
    }

    @Test func contextRetriesHalveDownToTheMessageAlone() throws {
        let history = (0..<16).map { message($0, $0 % 2 == 0 ? .user : .assistant) }
        var window = try InferenceWindow.select(history: history, currentImageCount: 0)
        var counts = [window.turns.count]
        while let limit = InferenceWindow.retryTurnCount(after: window) {
            window = try InferenceWindow.select(history: history, currentImageCount: 0, turnLimit: limit)
            counts.append(window.turns.count)
        }
        #expect(counts == [8, 4, 2, 1, 0])
        #expect(window.turns.isEmpty && window.omittedTurnCount == 8)
    }
}
