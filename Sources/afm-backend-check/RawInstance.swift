// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Foundation
import Synchronization

/// One instance of a backend, created through its vtable, with the calls the checks make.
///
/// Safety: `@unchecked Sendable` because it holds the backend's raw pointers. The ABI makes `generate` and `cancel`
/// thread-safe; the checks call `describe` and `destroy` from one thread, as a host's control thread would.
final class RawInstance: @unchecked Sendable {
    /// What a refused call said.
    struct Refusal: Error, CustomStringConvertible {
        var status: afm_status
        var errorCode: Int32
        var message: String
        var description: String { "status \(status) (error.code \(errorCode)): \(message)" }
    }

    let table: UnsafePointer<afm_backend_vtable>
    let pointer: OpaquePointer
    private let nextID = Atomic<UInt64>(1)

    /// `create` with the backend config document for `backend` and `settings`.
    init(table: UnsafePointer<afm_backend_vtable>, backend: String, settings: [String: String], stateDirectory: String)
        throws(Refusal)
    {
        let config = Self.configDocument(backend: backend, settings: settings, stateDirectory: stateDirectory)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        var out: OpaquePointer?
        let host = RawBackend.hostTable(major: UInt32(AFM_ABI_MAJOR), minor: UInt32(AFM_ABI_MINOR))
        let status = Array(config.utf8).withUnsafeBufferPointer { bytes in
            bytes.baseAddress!.withMemoryRebound(to: CChar.self, capacity: bytes.count) { data in
                table.pointee.create!(host, afm_str(data: data, size: UInt64(bytes.count)), &out, &error)
            }
        }
        guard status == AFM_OK, let out else {
            throw Refusal(status: status, errorCode: error.code, message: RawBackend.message(of: &error))
        }
        self.table = table
        pointer = out
    }

    /// The backend config document (docs/backend-abi.md §8.1).
    static func configDocument(backend: String, settings: [String: String], stateDirectory: String) -> String {
        let members = settings.sorted { $0.key < $1.key }.map { "\(quote($0.key)):\(quote($0.value))" }
        return #"{"config_version":1,"backend":\#(quote(backend)),"instance":\#(quote(backend + "#1")),"generation":1,"#
            + #""state_dir":\#(quote(stateDirectory)),"settings":{\#(members.joined(separator: ","))}}"#
    }

    /// `describe`: the document's bytes.
    func describe() throws(Refusal) -> [UInt8] {
        final class Buffer: @unchecked Sendable {
            // Safety: written only by the backend's `write`, on the calling (control) thread, during `describe`.
            var bytes: [UInt8] = []
        }
        let buffer = Buffer()
        let writer = UnsafeMutablePointer<afm_writer>.allocate(capacity: 1)  // never freed: a backend may keep it
        writer.initialize(
            to: afm_writer(
                struct_size: UInt32(MemoryLayout<afm_writer>.size), reserved0: 0,
                ctx: Unmanaged.passRetained(buffer).toOpaque(),
                write: { context, bytes in
                    guard let context, let data = bytes.data, bytes.size > 0, bytes.size < 64 << 20 else { return }
                    Unmanaged<Buffer>.fromOpaque(context).takeUnretainedValue().bytes += Array(
                        UnsafeRawBufferPointer(start: data, count: Int(bytes.size)))
                }))
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = table.pointee.describe!(pointer, writer, &error)
        guard status == AFM_OK else {
            throw Refusal(status: status, errorCode: error.code, message: RawBackend.message(of: &error))
        }
        return buffer.bytes
    }

    /// `generate` for `document` with a fresh recorder.
    ///
    /// - Returns: the recorder, and the refusal when `generate` did not return `AFM_OK`.
    func generate(_ document: [UInt8]) -> (recorder: GenerationRecorder, refusal: Refusal?) {
        let recorder = GenerationRecorder(requestID: nextID.add(1, ordering: .relaxed).oldValue)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = document.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) { data in
                table.pointee.generate!(
                    pointer, recorder.requestID, afm_str(data: data.baseAddress, size: UInt64(data.count)), recorder.sink,
                    &error)
            }
        }
        guard status == AFM_OK else {
            return (recorder, Refusal(status: status, errorCode: error.code, message: RawBackend.message(of: &error)))
        }
        return (recorder, nil)
    }

    /// `cancel` (the recorder's `emit` returns 1 from then on, as the host's does).
    func cancel(_ recorder: GenerationRecorder) {
        recorder.markCancelled()
        table.pointee.cancel!(pointer, recorder.requestID)
    }

    /// `cancel` for an id that was never started.
    func cancel(unknown id: UInt64) { table.pointee.cancel!(pointer, id) }

    /// `get_extension(id)`, or nil when the slot is NULL.
    func extensionTable(_ id: String) -> UnsafeRawPointer? {
        guard let getExtension = table.pointee.get_extension else { return nil }
        return id.withCString { getExtension(pointer, $0) }
    }

    /// `destroy`. Nothing may be called afterwards.
    func destroy() { table.pointee.destroy!(pointer) }
}

/// `string` as a JSON string literal.
func quote(_ string: String) -> String {
    var out = "\""
    for scalar in string.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "\""
}
