// SPDX-License-Identifier: Apache-2.0
import AFMCore

/// Where one backend instance runs, as `BackendGeneration` sees it: in `afmd` itself (`InProcessInstanceHost`)
/// or in an `afm-backend-runner` process (`RunnerInstanceHost`).
///
/// ```
///  BackendGeneration ──► BackendInstanceHost ─┬─ in-process: vtable calls, C sink ─► GenerationStream
///                                              └─ runner: frames over a socketpair ─► relay thread ─► GenerationStream
/// ```
///
/// # Implementation requirements
/// - `describe` and `retire` are called on the generation's serial control queue, never concurrently.
/// - `generate` registers `stream` before the backend can emit, and either returns (accepted: exactly one
///   terminal event will reach the stream, possibly from the host itself when the backend dies) or throws the
///   backend's synchronous refusal (then no event reaches the stream).
/// - `cancel` never blocks for long; it is harmless for unknown or finished ids.
/// - After `generationEnded(requestID:expired:)` with `expired` true the backend may still run the request: an
///   in-process host must never free what the backend may use; a runner host ends the process.
protocol BackendInstanceHost: Sendable {
    /// How this instance is hosted.
    var hosting: BackendManifest.Hosting { get }
    /// The runner's process id, when hosted by a runner.
    var processID: Int32? { get }

    /// Returns the describe document of the instance. [control queue]
    func describe() throws(BackendLoadError) -> BackendDescription

    /// Starts one generation whose events go to `stream`.
    ///
    /// - Throws: the backend's synchronous refusal, or `backend_crashed` when its runner is gone.
    func generate(requestID: UInt64, document: [UInt8], stream: GenerationStream) throws(AFMError)

    /// Asks the backend to stop a generation.
    func cancel(requestID: UInt64)

    /// The generation's stream delivered its terminal event (`expired`: the host synthesized it).
    func generationEnded(requestID: UInt64, expired: Bool)

    /// Counts input tokens with the backend's `afm.tokenize/1`, or nil when it has none (or it failed).
    ///
    /// - Throws: `busy` when a runner's tokenizer pool is full.
    func countInputTokens(document: [UInt8]) throws(AFMError) -> Int?

    /// Ends the instance once no generation is in flight: `destroy` (unless `abandoned`: a request was cut off
    /// and the backend may still run it), and for a runner the process exit. [control queue]
    func retire(abandoned: Bool)
}
