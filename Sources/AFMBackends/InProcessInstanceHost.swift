// SPDX-License-Identifier: Apache-2.0
import AFMCore
import Synchronization

/// In-process hosting: the backend's library is loaded into `afmd` and its vtable is called directly; events
/// arrive through the C sink trampoline (`GenerationTable`).
final class InProcessInstanceHost: BackendInstanceHost {
    let instance: BackendInstance
    private let sinks = Mutex<[UInt64: SinkPool.Sink]>([:])

    var hosting: BackendManifest.Hosting { .inProcess }
    var processID: Int32? { nil }

    init(instance: BackendInstance) {
        self.instance = instance
    }

    func describe() throws(BackendLoadError) -> BackendDescription {
        let bytes = try instance.describeDocument()
        do {
            return try BackendDescription(document: bytes, backendABIMinor: instance.library.abiMinor)
        } catch {
            throw BackendLoadError(path: instance.library.sourcePath, error.message, reason: "describe_failed")
        }
    }

    func generate(requestID: UInt64, document: [UInt8], stream: GenerationStream) throws(AFMError) {
        let table = GenerationTable.shared
        let sink = table.makeSink(for: requestID)
        sinks.withLock { $0[requestID] = sink }
        if let refusal = instance.generate(requestID: requestID, document: document, sink: sink.pointer) {
            // Refused synchronously: no event will come (ABI rule), so the sink is free again. Only whoever takes it
            // out of `sinks` recycles it: a backend that sent its terminal event and then refused (a contract
            // breach) must not get the sink into the pool twice, or two later generations would share it.
            if sinks.withLock({ $0.removeValue(forKey: requestID) }) != nil { table.recycle(sink) }
            throw refusal
        }
    }

    func cancel(requestID: UInt64) {
        instance.cancel(requestID: requestID)
    }

    func generationEnded(requestID: UInt64, expired: Bool) {
        guard let sink = sinks.withLock({ $0.removeValue(forKey: requestID) }) else { return }
        // An expired stream's backend may still call the sink: keep it out of the pool for good (retired, still
        // referenced: dropping it was reported by LeakSanitizer after GenerationTests' watchdog test).
        if expired { GenerationTable.shared.retire(sink) } else { GenerationTable.shared.recycle(sink) }
    }

    func countInputTokens(document: [UInt8]) throws(AFMError) -> Int? {
        instance.countInputTokens(document: document)
    }

    func retire(abandoned: Bool) {
        // A generation that had a stream cut off is leaked, never destroyed (its backend thread may still run).
        if !abandoned { instance.destroy() }
    }
}
