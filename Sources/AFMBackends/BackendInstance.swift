// SPDX-License-Identifier: Apache-2.0
import AFMCore
import CAFMBackendABI

/// One backend instance inside a loaded library: the raw vtable calls, shared by in-process hosting and
/// `afm-backend-runner` (so both hostings run the same code against a backend).
///
/// `create`, `describe` and `destroy` are [control-thread] calls: the caller runs them on one serial queue per
/// instance. `generate`, `cancel` and `countInputTokens` are [thread-safe].
struct BackendInstance: Sendable {
    /// The library the instance lives in.
    let library: BackendLibrary
    /// The backend's instance pointer. Safety: `generate`, `cancel` and `get_extension` are [thread-safe] by the
    /// ABI, and `destroy` is called once, on the control queue, only when no generation is in flight.
    struct Pointer: @unchecked Sendable {
        let raw: OpaquePointer
    }
    let pointer: Pointer

    /// Calls `create` with the backend config document. [control-thread]
    ///
    /// - Throws: `BackendLoadError` with reason `create_failed`.
    static func create(library: BackendLibrary, configDocument: [UInt8]) throws(BackendLoadError) -> BackendInstance {
        var error = afm_error.empty
        var created: OpaquePointer?
        let status = configDocument.withUnsafeBytes { bytes in
            library.vtable.create(library.host.pointer, afm_str(bytes), &created, &error)
        }
        guard status == AFM_OK, let created else {
            let code = AFMErrorCode(abiValue: status == AFM_OK ? AFM_ERR_INTERNAL : status)
            let message = status == AFM_OK ? "create returned AFM_OK without an instance" : error.messageString
            throw BackendLoadError(path: library.sourcePath, "create failed (\(code.rawValue)): \(message)", reason: "create_failed")
        }
        return BackendInstance(library: library, pointer: Pointer(raw: created))
    }

    /// Calls `describe` and returns the document's bytes. [control-thread]
    ///
    /// - Throws: `BackendLoadError` with reason `describe_failed` when the backend returns an error.
    func describeDocument() throws(BackendLoadError) -> [UInt8] {
        let collector = DocumentCollector()
        var writer = afm_writer(
            struct_size: UInt32(MemoryLayout<afm_writer>.size), reserved0: 0,
            ctx: Unmanaged.passUnretained(collector).toOpaque(), write: documentWriteTrampoline)
        var error = afm_error.empty
        let status = withExtendedLifetime(collector) { library.vtable.describe(pointer.raw, &writer, &error) }
        guard status == AFM_OK else {
            throw BackendLoadError(path: library.sourcePath, "describe failed: \(error.messageString)", reason: "describe_failed")
        }
        return collector.bytes
    }

    /// Calls `generate`. Returns nil when accepted, or the refusal. [thread-safe]
    func generate(requestID: UInt64, document: [UInt8], sink: UnsafePointer<afm_event_sink>) -> AFMError? {
        var error = afm_error.empty
        let status = document.withUnsafeBytes { bytes in
            library.vtable.generate(pointer.raw, requestID, afm_str(bytes), sink, &error)
        }
        guard status != AFM_OK else { return nil }
        let code = AFMErrorCode(abiValue: status)
        let message = error.messageString
        return AFMError(code, message.isEmpty ? "the backend refused the request (\(code.rawValue))" : message)
    }

    /// Calls `cancel`. [thread-safe]
    func cancel(requestID: UInt64) {
        library.vtable.cancel(pointer.raw, requestID)
    }

    /// Counts input tokens with `afm.tokenize/1`, or nil when the backend has no such extension or it fails.
    func countInputTokens(document: [UInt8]) -> Int? {
        guard let getExtension = library.vtable.getExtension, let raw = getExtension(pointer.raw, AFM_EXT_TOKENIZE) else {
            return nil
        }
        let tokenize = raw.assumingMemoryBound(to: afm_ext_tokenize.self).pointee
        guard tokenize.struct_size >= UInt32(MemoryLayout<afm_ext_tokenize>.size), let count = tokenize.count_input_tokens
        else { return nil }
        var tokens: Int64 = 0
        var error = afm_error.empty
        let status = document.withUnsafeBytes { bytes in count(pointer.raw, afm_str(bytes), &tokens, &error) }
        // Untrusted like usage counts: capped by the same rule (negative: no count).
        return status == AFM_OK ? BackendUsage.count(abiValue: tokens) : nil
    }

    /// Calls `destroy`. [control-thread] Only when every accepted generation sent its terminal event.
    func destroy() {
        library.vtable.destroy(pointer.raw)
    }
}

extension afm_error {
    /// An error report with `struct_size` set, ready to pass to a backend.
    static var empty: afm_error {
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        return error
    }
}

extension afm_str {
    /// A span over raw bytes, borrowed for the call that receives it.
    init(_ bytes: UnsafeRawBufferPointer) {
        self.init(data: bytes.baseAddress?.assumingMemoryBound(to: CChar.self), size: UInt64(bytes.count))
    }
}

/// Collects the bytes a backend writes through an `afm_writer`.
private final class DocumentCollector {
    var bytes: [UInt8] = []
}

private let documentWriteTrampoline: @convention(c) (UnsafeMutableRawPointer?, afm_str) -> Void = { context, chunk in
    guard let context else { return }
    let collector = Unmanaged<DocumentCollector>.fromOpaque(context).takeUnretainedValue()
    guard collector.bytes.count + Int(min(chunk.size, 64 << 20)) <= 64 << 20 else { return }  // 64 MiB cap
    collector.bytes += chunk.bytes()
}
