// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMSystem

/// Runs one answer: picks the inference window, streams the response while watching the keyboard for Ctrl-C,
/// and retries with half of the older turns when the server reports `context_length_exceeded` before any text.
struct TurnRunner {
    /// How an answer ended.
    struct Outcome {
        var text: String
        var state: MessageState
        var model: String?
        /// The context notice and/or the error, for the message's notice column.
        var notice: String?
        /// The error code when failed (for exit statuses).
        var errorCode: String?
    }

    let client: ResponsesClient
    let console: Console
    /// Whether the model's text is neutralized before it is written (``Console/shown(_:)``): always in `afm chat`;
    /// `afm respond` writes it unchanged when its output is not a terminal (a script gets the exact text).
    var neutralizes = true
    /// How often streamed text is saved while it arrives.
    var saveIntervalNanoseconds: UInt64 = 200_000_000

    /// Streams the answer to `parts` given earlier `history`.
    ///
    /// - Parameters:
    ///   - keyboard: the descriptor to watch while streaming (nil: none).
    ///   - onKeys: gets keyboard bytes; returns true to stop the answer (Ctrl-C).
    ///   - onProgress: gets the text so far, at most every ``saveIntervalNanoseconds`` (to save it).
    func run(
        model: String, history: [ChatMessage], parts: [ContentPart], imageBytes: (ImageReference) throws -> [UInt8],
        keyboard: FileDescriptor?, onKeys: ([UInt8]) -> Bool, onProgress: (String) -> Void
    ) -> Outcome {
        let imageCount = parts.filter { $0.image != nil }.count
        var window: InferenceWindow
        do {
            window = try InferenceWindow.select(history: history, currentImageCount: imageCount)
        } catch {
            return Outcome(text: "", state: .failed, model: nil, notice: "\(error)", errorCode: "invalid_request")
        }
        var renderer = MarkdownRenderer(colors: console.isTerminal)
        // Set to nil at end of input: a descriptor at EOF polls readable forever, which would spin the loop.
        var watchedKeyboard = keyboard
        while true {
            if let notice = window.notice { console.write(console.dim("(\(notice))") + "\n") }
            let body: [UInt8]
            let stream: ResponseStream
            do {
                body = try ResponsesClient.requestBody(model: model, window: window, current: parts, imageBytes: imageBytes)
                stream = try client.startStream(body: body)
            } catch {
                return Outcome(text: "", state: .failed, model: nil, notice: "\(error)", errorCode: "model_unavailable")
            }
            var text = ""
            var actualModel: String?
            var lastSave = SystemClock.monotonicNanoseconds()
            var terminal: (MessageState, String?, String?)?
            loop: while terminal == nil {
                var watched = [stream.descriptor]
                if let watchedKeyboard { watched.append(watchedKeyboard) }
                let ready = (try? PollSet.waitReadable(watched, timeoutMilliseconds: 250)) ?? []
                if let keyboard = watchedKeyboard, ready.contains(keyboard) {
                    var buffer = [UInt8](repeating: 0, count: 256)
                    let result = try? buffer.withUnsafeMutableBytes { try keyboard.read(into: $0) }
                    switch result {
                    case .processed(let count)? where count > 0:
                        if onKeys(Array(buffer[0..<count])) {
                            stream.cancel()
                            terminal = (.interrupted, "stopped with Ctrl-C", "cancelled")
                            break loop
                        }
                    case .processed?, nil:
                        // End of input (or a read error): the answer goes on; the session ends after it.
                        watchedKeyboard = nil
                    case .wouldBlock?:
                        break
                    }
                }
                for event in stream.readEvents() {
                    switch event {
                    case .started(let model): actualModel = model
                    case .outputItem, .usage: break  // the chat offers no tools and does not show usage
                    case .textDelta(let delta):
                        text += delta
                        console.write(renderer.feed(neutralizes ? console.shown(delta) : delta))
                    case .completed: terminal = (.complete, nil, nil)
                    case .incomplete(let reason):
                        terminal = (.incomplete, "the answer was cut off (\(reason)); /retry to ask again", nil)
                    case .failed(let code, let message):
                        if code == "context_length_exceeded" && text.isEmpty {
                            guard let limit = InferenceWindow.retryTurnCount(after: window) else {
                                terminal = (.failed, "your message is too long for this model: \(message)", code)
                                break
                            }
                            window = (try? InferenceWindow.select(history: history, currentImageCount: imageCount, turnLimit: limit))
                                ?? InferenceWindow(turns: [], omittedTurnCount: window.omittedTurnCount + window.turns.count)
                            stream.cancel()
                            continue
                        }
                        terminal = (.failed, "\(code): \(message)", code)
                    }
                }
                if terminal == nil && stream.isFinished { break loop }  // cancelled for a context retry
                let now = SystemClock.monotonicNanoseconds()
                if now - lastSave >= saveIntervalNanoseconds {
                    lastSave = now
                    onProgress(text)
                }
            }
            guard let (state, error, code) = terminal else { continue }  // retry with the smaller window
            console.write(renderer.finish())
            var notices: [String] = []
            if let notice = window.notice { notices.append(notice) }
            if let error { notices.append(error) }
            return Outcome(
                text: text, state: state, model: actualModel, notice: notices.isEmpty ? nil : notices.joined(separator: "; "),
                errorCode: code
            )
        }
    }
}
