// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMSystem

/// Runs one answer for a chat client (the terminal's and the web chat's): picks the inference window, streams the
/// response, and asks again with half of the older turns when the server reports `context_length_exceeded` before
/// any text.
///
/// Blocking: it polls the stream's socket (and an optional second descriptor, the terminal's keyboard) on the
/// calling thread, which must therefore be a thread of its own (the terminal's main thread, a web turn's thread),
/// never the cooperative pool.
public struct AnswerRunner {
    /// How an answer ended.
    public struct Outcome: Sendable {
        public var text: String
        public var state: MessageState
        public var model: String?
        /// The context notice and/or the error, for the message's notice column.
        public var notice: String?
        /// The error code when failed (for exit statuses).
        public var errorCode: String?
        /// The tokens the answer took, when the gateway reported them.
        public var usage: ResponseUsage?

        public init(text: String, state: MessageState, model: String?, notice: String?, errorCode: String?, usage: ResponseUsage? = nil) {
            self.text = text
            self.state = state
            self.model = model
            self.notice = notice
            self.errorCode = errorCode
            self.usage = usage
        }
    }

    /// What the caller wants after its watched descriptor was readable.
    public enum WatchResult: Sendable {
        /// Go on, and keep watching.
        case keep
        /// Go on without watching it any more (it reached end of input).
        case forget
        /// Stop the answer (it ends `interrupted`).
        case stop
    }

    public let client: ResponsesClient
    /// How often the text so far is handed to `onProgress` (to be saved) while it arrives.
    public var saveIntervalNanoseconds: UInt64 = 200_000_000
    /// How long one wait for the stream lasts, which bounds how late `shouldStop` is noticed.
    public var pollMilliseconds: Int32 = 250

    public init(client: ResponsesClient) {
        self.client = client
    }

    /// Streams the answer to `parts` given earlier `history`.
    ///
    /// - Parameters:
    ///   - watch: a descriptor polled with the stream (the keyboard), nil for none.
    ///   - onWatchReadable: called when `watch` is readable.
    ///   - shouldStop: asked between waits; true stops the answer (`interrupted`, "stopped").
    ///   - onNotice: the notice when older turns are left out (before the text, and again after a context retry).
    ///   - onDelta: each piece of text as it arrives.
    ///   - onProgress: the text so far, at most every ``saveIntervalNanoseconds``.
    public func run(
        model: String, history: [ChatMessage], parts: [ContentPart], imageBytes: (ImageReference) throws -> [UInt8],
        watch: FileDescriptor? = nil, onWatchReadable: (FileDescriptor) -> WatchResult = { _ in .forget },
        shouldStop: () -> Bool = { false }, stopNotice: String = "stopped",
        onNotice: (String) -> Void = { _ in }, onStarted: (String) -> Void = { _ in }, onDelta: (String) -> Void,
        onProgress: (String) -> Void = { _ in }
    ) -> Outcome {
        let imageCount = parts.filter { $0.image != nil }.count
        var window: InferenceWindow
        do {
            window = try InferenceWindow.select(history: history, currentImageCount: imageCount)
        } catch {
            return Outcome(text: "", state: .failed, model: nil, notice: "\(error)", errorCode: "invalid_request")
        }
        // Set to nil at end of input: a descriptor at EOF polls readable forever, which would spin the loop.
        var watched = watch
        while true {
            if let notice = window.notice { onNotice(notice) }
            let stream: ResponseStream
            do {
                let body = try ResponsesClient.requestBody(model: model, window: window, current: parts, imageBytes: imageBytes)
                stream = try client.startStream(body: body)
            } catch {
                return Outcome(text: "", state: .failed, model: nil, notice: "\(error)", errorCode: "model_unavailable")
            }
            var text = ""
            var actualModel: String?
            var usage: ResponseUsage?
            var lastSave = SystemClock.monotonicNanoseconds()
            var terminal: (MessageState, String?, String?)?
            loop: while terminal == nil {
                if shouldStop() {
                    stream.cancel()
                    terminal = (.interrupted, stopNotice, "cancelled")
                    break loop
                }
                var descriptors = [stream.descriptor]
                if let watched { descriptors.append(watched) }
                let ready = (try? PollSet.waitReadable(descriptors, timeoutMilliseconds: pollMilliseconds)) ?? []
                if let descriptor = watched, ready.contains(descriptor) {
                    switch onWatchReadable(descriptor) {
                    case .keep: break
                    case .forget: watched = nil
                    case .stop:
                        stream.cancel()
                        terminal = (.interrupted, stopNotice, "cancelled")
                        break loop
                    }
                }
                for event in stream.readEvents() {
                    switch event {
                    case .started(let model):
                        actualModel = model
                        onStarted(model)
                    case .textDelta(let delta):
                        text += delta
                        onDelta(delta)
                    case .usage(let reported): usage = reported
                    case .outputItem: break  // the chat offers no tools
                    case .completed: terminal = (.complete, nil, nil)
                    case .incomplete(let reason):
                        terminal = (.incomplete, "the answer was cut off (\(reason))", nil)
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
            var notices: [String] = []
            if let notice = window.notice { notices.append(notice) }
            if let error { notices.append(error) }
            return Outcome(
                text: text, state: state, model: actualModel, notice: notices.isEmpty ? nil : notices.joined(separator: "; "),
                errorCode: code, usage: usage
            )
        }
    }
}
