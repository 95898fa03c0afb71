// SPDX-License-Identifier: Apache-2.0
// The afm-dev example backend in Swift, written with AFMBackendKit: one model, "example-swift-hello", that answers
// every request with a fixed greeting. The kit does the ABI (negotiation, vtable, pointer checks, error codes);
// the backend implements AFMBackend and exports afm_backend_negotiate as one call into the kit.
//
// In AFM's source tree it is the target AFMExampleSwiftBackend (product afm-backend-example-swift):
//   swift build --product afm-backend-example-swift
//   afm-backend-check .build/debug/libafm-backend-example-swift.so
import AFMBackendKit
import Foundation

final class ExampleSwiftBackend: AFMBackend {
    static let id: StaticString = "example-swift"
    static let version: StaticString = "1.0.0"

    /// `create`: this example takes no settings, so any is refused (a typo in afmd.conf must not pass silently).
    init(host: HostAPI, configJSON: Data) throws(BackendError) {
        let config = try JSON.object(from: configJSON)
        if let settings = JSON.object(config["settings"]), let key = settings.keys.sorted().first {
            throw .invalidRequest("unknown setting \(key)")
        }
        host.log(AFM_LOG_INFO, "example-swift instance created")
    }

    func describeDocument() -> String {
        BackendDescription(
            backend: "example-swift", version: "1.0.0",
            models: [ModelDescription(id: "example-swift-hello", contextTokens: 4096)]
        ).json
    }

    /// Every event is at hand, so they are sent from inside `generate` (docs/backend-abi.md §5: at most 64); a real
    /// model runs on a thread of its own, which `cancel` stops and `destroy` joins.
    func generate(requestID: UInt64, requestJSON: UnsafeBufferPointer<UInt8>, sink: EventSink) throws(BackendError) {
        let request = try JSON.object(from: Data(buffer: requestJSON))
        // A reader refuses a document version it does not know (docs/backend-abi.md §1).
        guard let version = JSON.int(request["request_version"]) else {
            throw .invalidRequest("the request has no request_version")
        }
        guard version == 1 else { throw .incompatible("example-swift reads request_version 1, not \(version)") }
        guard JSON.string(request["model"]) == "example-swift-hello" else {
            throw .modelUnavailable("example-swift serves only the model example-swift-hello")
        }
        var words = 0
        for word in ["Hello", " from", " the", " Swift", " example."] {
            guard sink.emit(AFM_EVENT_TEXT_DELTA, text: word) else { break }
            words += 1
        }
        sink.emit(AFM_EVENT_USAGE, usage: .init(inputTokens: 1, outputTokens: Int64(words), reasoningTokens: 0, cachedTokens: 0))
        sink.emit(AFM_EVENT_DONE, code: words == 5 ? AFM_FINISH_STOP : AFM_FINISH_CANCELLED)
    }

    func cancel(requestID: UInt64) {}  // nothing runs after generate returns
    func destroy() {}  // no thread to join
}

/// The one exported symbol.
@c(afm_backend_negotiate)
public func afmBackendNegotiate(
    _ host: UnsafePointer<afm_host_api>?, _ out: UnsafeMutablePointer<afm_backend_info>?,
    _ error: UnsafeMutablePointer<afm_error>?
) -> afm_status {
    BackendKit.negotiate(ExampleSwiftBackend.self, host: host, out: out, error: error)
}
