// SPDX-License-Identifier: Apache-2.0
import AFMCore
import Synchronization

/// A claim on one backend generation for one request.
///
/// While a lease is held its generation is not destroyed, even after a reload switched new traffic elsewhere.
/// Starting a generation hands the lease to the stream, which releases it on its terminal event; a lease that
/// is never started must be released by its holder (and is, at the latest, when it is deinitialized).
public final class BackendLease: Sendable {
    /// The generation the request runs on.
    public let generation: BackendGeneration
    /// The model the request asked for, as the generation describes it.
    public let model: BackendDescription.Model
    private let released = Atomic<Bool>(false)
    private let limits: GenerationLimits
    /// The registry's cancel grace, which the stream follows (``SharedCancelGrace``).
    private let cancelGrace: SharedCancelGrace

    init(generation: BackendGeneration, model: BackendDescription.Model, limits: GenerationLimits, cancelGrace: SharedCancelGrace) {
        self.generation = generation
        self.model = model
        self.limits = limits
        self.cancelGrace = cancelGrace
    }

    deinit { release() }

    /// Starts the generation for a request document (docs/backend-abi.md); the lease now belongs to the stream.
    ///
    /// - Throws: `AFMError` with the backend's code when it refuses the request synchronously.
    public func start(requestDocument: [UInt8]) throws(AFMError) -> GenerationStream {
        try generation.start(requestDocument: requestDocument, lease: self, limits: limits, cancelGrace: cancelGrace)
    }

    /// Counts the request's input tokens with the backend's tokenizer, when it offers one.
    ///
    /// - Throws: `busy` (503 with Retry-After) when a runner's tokenizer pool is full.
    public func countInputTokens(requestDocument: [UInt8]) throws(AFMError) -> Int? {
        try generation.countInputTokens(requestDocument: requestDocument)
    }

    /// Gives the lease back. Idempotent.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        generation.release()
    }
}
