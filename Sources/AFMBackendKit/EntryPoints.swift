// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Foundation

/// The vtable slots: capture-free C thunks that unwrap the instance and turn every failure into a status code.
///
/// Nothing here traps on input: NULL pointers, oversized spans and malformed documents all become
/// `AFM_ERR_INVALID_REQUEST` (or another `AFM_ERR_*`) with a message.
enum EntryPoints {
    // MARK: - The C signatures of the slots (afm_backend.h)

    typealias CreateFunction =
        @convention(c) (
            UnsafePointer<afm_host_api>?, afm_str, UnsafeMutablePointer<OpaquePointer?>?,
            UnsafeMutablePointer<afm_error>?
        ) -> afm_status
    typealias DescribeFunction =
        @convention(c) (
            OpaquePointer?, UnsafePointer<afm_writer>?, UnsafeMutablePointer<afm_error>?
        ) -> afm_status
    typealias GenerateFunction =
        @convention(c) (
            OpaquePointer?, UInt64, afm_str, UnsafePointer<afm_event_sink>?, UnsafeMutablePointer<afm_error>?
        ) -> afm_status
    typealias CancelFunction = @convention(c) (OpaquePointer?, UInt64) -> Void
    typealias DestroyFunction = @convention(c) (OpaquePointer?) -> Void
    typealias GetExtensionFunction = @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> UnsafeRawPointer?
    typealias CountInputTokensFunction =
        @convention(c) (
            OpaquePointer?, afm_str, UnsafeMutablePointer<Int64>?, UnsafeMutablePointer<afm_error>?
        ) -> afm_status

    // MARK: - The slots

    /// `create`: an instance of the registered backend type from the config document.
    static let create: CreateFunction = { host, config, out, errorOut in
        guard let out else { return BackendError.invalidRequest("create: out is NULL").report(into: errorOut) }
        guard let registration = BackendKit.registration else {
            return BackendError.internal("create: called before afm_backend_negotiate").report(into: errorOut)
        }
        guard let bytes = borrowed(config) else {
            return BackendError.invalidRequest("create: the config span is invalid").report(into: errorOut)
        }
        do throws(BackendError) {
            let backend = try registration.type.init(host: HostAPI(host), configJSON: Data(buffer: bytes))
            out.pointee = OpaquePointer(Unmanaged.passRetained(InstanceBox(backend)).toOpaque())
            return AFM_OK
        } catch {
            return error.report(into: errorOut)
        }
    }

    /// `describe`: writes the describe document.
    static let describe: DescribeFunction = { pointer, writer, errorOut in
        guard let box = box(pointer) else {
            return BackendError.invalidRequest("describe: instance is NULL").report(into: errorOut)
        }
        guard let writer, Int(writer.pointee.struct_size) >= MemoryLayout<afm_writer>.size,
            let write = writer.pointee.write
        else {
            return BackendError.invalidRequest("describe: the writer is NULL, too small or has no write function")
                .report(into: errorOut)
        }
        var document = box.backend.describeDocument()
        document.withUTF8 { bytes in
            let data = bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            write(writer.pointee.ctx, afm_str(data: data, size: UInt64(bytes.count)))
        }
        return AFM_OK
    }

    /// `generate`: checks the pointers, then hands the request (borrowed) and a sink to the backend.
    static let generate: GenerateFunction = { pointer, requestID, request, rawSink, errorOut in
        guard let box = box(pointer) else {
            return BackendError.invalidRequest("generate: instance is NULL").report(into: errorOut)
        }
        guard let bytes = borrowed(request) else {
            return BackendError.invalidRequest("generate: the request span is invalid").report(into: errorOut)
        }
        guard let sink = EventSink(rawSink) else {
            return BackendError.invalidRequest("generate: the event sink is NULL, too small or has no emit function")
                .report(into: errorOut)
        }
        do throws(BackendError) {
            try box.backend.generate(requestID: requestID, requestJSON: bytes, sink: sink)
            return AFM_OK
        } catch {
            return error.report(into: errorOut)
        }
    }

    /// `cancel`: asks a running generation to stop; harmless for unknown ids.
    static let cancel: CancelFunction = { pointer, requestID in
        box(pointer)?.backend.cancel(requestID: requestID)
    }

    /// `destroy`: lets the backend join its threads, then releases the instance.
    static let destroy: DestroyFunction = { pointer in
        guard let pointer else { return }
        let unmanaged = Unmanaged<InstanceBox>.fromOpaque(UnsafeRawPointer(pointer))
        unmanaged.takeUnretainedValue().backend.destroy()
        unmanaged.release()
    }

    /// `get_extension`: `afm.tokenize/1` for a `TokenCountingBackend`, else NULL.
    static let getExtension: GetExtensionFunction = { pointer, id in
        guard let id, box(pointer)?.tokenCounter != nil, String(cString: id) == AFM_EXT_TOKENIZE else { return nil }
        return UnsafeRawPointer(StaticTables.shared.tokenize)
    }

    /// `afm.tokenize/1` `count_input_tokens`.
    static let countInputTokens: CountInputTokensFunction = { pointer, request, tokens, errorOut in
        guard let counter = box(pointer)?.tokenCounter, let tokens else {
            return BackendError.invalidRequest("count_input_tokens: instance or out_tokens is NULL")
                .report(into: errorOut)
        }
        guard let bytes = borrowed(request) else {
            return BackendError.invalidRequest("count_input_tokens: the request span is invalid").report(
                into: errorOut)
        }
        do throws(BackendError) {
            tokens.pointee = Int64(try counter.countInputTokens(requestJSON: Data(buffer: bytes)))
            return AFM_OK
        } catch {
            return error.report(into: errorOut)
        }
    }

    // MARK: - Helpers

    /// The box behind an `afm_instance *`, without changing its retain count.
    private static func box(_ pointer: OpaquePointer?) -> InstanceBox? {
        guard let pointer else { return nil }
        return Unmanaged<InstanceBox>.fromOpaque(UnsafeRawPointer(pointer)).takeUnretainedValue()
    }

    /// The bytes of a borrowed span without copying them, or nil for a span with no data but a size.
    private static func borrowed(_ span: afm_str) -> UnsafeBufferPointer<UInt8>? {
        guard span.size > 0 else { return UnsafeBufferPointer(start: nil, count: 0) }
        guard let base = span.data, let count = Int(exactly: span.size) else { return nil }
        return UnsafeBufferPointer(start: UnsafeRawPointer(base).assumingMemoryBound(to: UInt8.self), count: count)
    }
}
