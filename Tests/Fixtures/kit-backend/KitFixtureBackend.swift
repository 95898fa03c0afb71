// SPDX-License-Identifier: Apache-2.0
// A backend written with AFMBackendKit that makes, on purpose, the mistakes the kit must keep from reaching the
// host (BackendKitTests): refusals with error codes outside the table, an ERROR event with code 0, and one
// generation's events emitted from two threads at once.
import AFMBackendKit
import Dispatch
import Foundation

final class KitFixtureBackend: AFMBackend {
    static let id: StaticString = "kit-fixture"
    static let version: StaticString = "1.0.0"

    /// The generation threads still running, which `destroy` waits for.
    private let running = DispatchGroup()

    init(host: HostAPI, configJSON: Data) throws(BackendError) {}

    func describeDocument() -> String {
        BackendDescription(
            backend: "kit-fixture", version: "1.0.0",
            models: ["kit-two-threads", "kit-error-event"].map { ModelDescription(id: $0, contextTokens: 4096) }
        ).json
    }

    /// - `kit-two-threads`: a thread of its own starts two threads that emit 3 deltas each at the same moment (a
    ///   bug: the ABI serializes one generation's emits), then USAGE and DONE.
    /// - `kit-error-event`: an ERROR event with code 0 (a bug: not an error code).
    /// - any other model: refused with code 0 (a bug: that says "accepted"); malformed JSON: refused with 99.
    func generate(requestID: UInt64, requestJSON: UnsafeBufferPointer<UInt8>, sink: EventSink) throws(BackendError) {
        guard let request = try? JSON.object(from: Data(buffer: requestJSON)) else {
            throw BackendError(99, "the request is not JSON")
        }
        switch JSON.string(request["model"]) {
        case "kit-two-threads":
            running.enter()
            let thread = Thread { [running] in
                defer { running.leave() }
                let ready = DispatchSemaphore(value: 0)
                let go = DispatchSemaphore(value: 0)
                let done = DispatchSemaphore(value: 0)
                for name in ["a", "b"] {
                    Thread.detachNewThread {
                        ready.signal()
                        go.wait()
                        for index in 0..<3 { sink.emit(AFM_EVENT_TEXT_DELTA, text: "\(name)\(index) ") }
                        done.signal()
                    }
                }
                ready.wait()
                ready.wait()
                go.signal()
                go.signal()
                done.wait()
                done.wait()
                sink.emit(AFM_EVENT_USAGE, usage: .init(inputTokens: 1, outputTokens: 6, reasoningTokens: 0, cachedTokens: 0))
                sink.emit(AFM_EVENT_DONE, code: AFM_FINISH_STOP)
            }
            thread.start()
        case "kit-error-event":
            sink.emit(AFM_EVENT_ERROR, code: 0, text: "an error without a code")
        default:
            throw BackendError(AFM_OK, "kit-fixture has no such model")
        }
    }

    func cancel(requestID: UInt64) {}

    func destroy() { running.wait() }
}

/// The one exported symbol.
@c(afm_backend_negotiate)
public func afmBackendNegotiate(
    _ host: UnsafePointer<afm_host_api>?, _ out: UnsafeMutablePointer<afm_backend_info>?,
    _ error: UnsafeMutablePointer<afm_error>?
) -> afm_status {
    BackendKit.negotiate(KitFixtureBackend.self, host: host, out: out, error: error)
}
