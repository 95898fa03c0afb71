// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMSystem

/// Runs one answer on the terminal: ``AnswerRunner`` streams it while the keyboard is watched for Ctrl-C, and the
/// text is written through the Markdown renderer as it arrives.
struct TurnRunner {
    typealias Outcome = AnswerRunner.Outcome

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
        var renderer = console.markdownRenderer()
        var runner = AnswerRunner(client: client)
        runner.saveIntervalNanoseconds = saveIntervalNanoseconds
        let outcome = runner.run(
            model: model, history: history, parts: parts, imageBytes: imageBytes, watch: keyboard,
            onWatchReadable: { keyboard in
                var buffer = [UInt8](repeating: 0, count: 256)
                let result = try? buffer.withUnsafeMutableBytes { try keyboard.read(into: $0) }
                switch result {
                case .processed(let count)? where count > 0:
                    return onKeys(Array(buffer[0..<count])) ? .stop : .keep
                case .processed?, nil:
                    return .forget  // end of input (or a read error): the answer goes on; the session ends after it
                case .wouldBlock?:
                    return .keep
                }
            },
            stopNotice: "stopped with Ctrl-C",
            onNotice: { notice in console.write(console.dim("(\(notice))") + "\n") },
            onDelta: { delta in console.write(renderer.feed(neutralizes ? console.shown(delta) : delta)) },
            onProgress: onProgress
        )
        console.write(renderer.finish())
        return outcome
    }
}
