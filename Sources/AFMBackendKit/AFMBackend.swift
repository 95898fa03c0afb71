// SPDX-License-Identifier: Apache-2.0
import Foundation

/// The one protocol a Swift backend implements: an instance of the backend, created from the host's config.
///
/// The kit does the rest of the ABI (docs/backend-abi.md): the exported negotiation (`BackendKit.negotiate`), the
/// static vtable whose C slots unwrap the instance, NULL and size checks on every pointer the host passes, the
/// event sink, the host's log, and turning every thrown `BackendError` into a status code and a filled
/// `afm_error`. A backend only writes what is its own:
///
/// ```swift
/// final class HelloBackend: AFMBackend {
///     static let id: StaticString = "hello"
///     static let version: StaticString = "0.1.0"
///     init(host: HostAPI, configJSON: Data) throws(BackendError) { … }   // parse settings, refuse unknown keys
///     func describeDocument() -> String { BackendDescription(…).json }
///     func generate(requestID: UInt64, requestJSON: UnsafeBufferPointer<UInt8>, sink: EventSink)
///         throws(BackendError) { … }                                       // validate, then start a thread
///     func cancel(requestID: UInt64) { … }
///     func destroy() { … }                                                 // join every thread
/// }
///
/// @c(afm_backend_negotiate)
/// public func afmBackendNegotiate(
///     _ host: UnsafePointer<afm_host_api>?, _ out: UnsafeMutablePointer<afm_backend_info>?,
///     _ error: UnsafeMutablePointer<afm_error>?
/// ) -> afm_status {
///     BackendKit.negotiate(HelloBackend.self, host: host, out: out, error: error)
/// }
/// ```
///
/// Threads (the header's tags): `init`, `describeDocument` and `destroy` run on the host's control thread;
/// `generate` and `cancel` on any host thread, concurrently with each other. Nothing is called after `destroy`.
public protocol AFMBackend: AnyObject, Sendable {
    /// The stable backend id: 1–64 characters of `a-z 0-9 . - _`, equal to the manifest's `id`.
    static var id: StaticString { get }
    /// The backend's own version, reported at negotiation.
    static var version: StaticString { get }

    /// `create`: an instance from the backend config document (docs/backend-abi.md §8.1), borrowed for the call.
    ///
    /// - Throws: `invalid_request` for an unknown or malformed setting (naming it), `incompatible` for a
    ///   `config_version` it does not know, `model_unavailable` when its model cannot be loaded.
    init(host: HostAPI, configJSON: Data) throws(BackendError)

    /// `describe`: the describe document (docs/backend-abi.md §8.3); `BackendDescription` builds one.
    func describeDocument() -> String

    /// `generate`: validates the request (§8.2) and starts the generation; returns at once.
    ///
    /// `requestJSON` is borrowed for this call only. After a normal return, exactly one terminal event
    /// (`AFM_EVENT_DONE` or `AFM_EVENT_ERROR`) must follow on `sink`, from any thread (or from inside this call
    /// when every event is at hand: at most 64 of them).
    ///
    /// - Throws: the refusal (no event is sent then): `invalid_request`, `model_unavailable`,
    ///   `context_length_exceeded`, `unsupported_capability`, `busy`, …
    func generate(requestID: UInt64, requestJSON: UnsafeBufferPointer<UInt8>, sink: EventSink) throws(BackendError)

    /// `cancel`: asks a running generation to stop (it then ends with DONE/CANCELLED). Non-blocking, idempotent,
    /// harmless for unknown or finished ids.
    func cancel(requestID: UInt64)

    /// `destroy`: joins every thread the instance started. The kit releases the instance afterwards.
    func destroy()
}

/// A backend that counts input tokens: the kit offers the `afm.tokenize/1` extension for it (docs/backend-abi.md
/// §7), and `get_extension` returns NULL for every other backend.
public protocol TokenCountingBackend: AFMBackend {
    /// The input tokens of a generation request document (§8.2), as `generate` would count them.
    ///
    /// - Throws: `invalid_request` for a malformed document, `model_unavailable` for a model it does not serve.
    func countInputTokens(requestJSON: Data) throws(BackendError) -> Int
}
