// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import CAFMBackendABI
import Dispatch
import Foundation
import Synchronization

/// Drives the kit fixture backend (`Tests/Fixtures/kit-backend`, built as libafm-backend-kit-fixture.so) through the
/// bare C ABI, as a host does, with a sink that spends 20 ms in every `emit` and counts calls that overlap.
final class KitFixtureDriver {
    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// The events of one generation, as the sink saw them.
    final class Recorder: @unchecked Sendable {
        // Safety: `sink` is written once in init before the recorder is shared; everything else is a Mutex or atomic.
        let events = Mutex<[(type: Int32, code: Int32)]>([])
        let overlaps = Atomic<Int>(0)
        private let inEmit = Atomic<Bool>(false)
        let terminal = DispatchSemaphore(value: 0)
        let sink: UnsafeMutablePointer<afm_event_sink>

        init() {
            sink = .allocate(capacity: 1)  // never freed: the backend may call it after the test moved on
            sink.initialize(to: afm_event_sink())
            sink.pointee.struct_size = UInt32(MemoryLayout<afm_event_sink>.size)
            sink.pointee.ctx = Unmanaged.passRetained(self).toOpaque()
            sink.pointee.emit = { context, event in
                guard let context, let event else { return 1 }
                let recorder = Unmanaged<Recorder>.fromOpaque(context).takeUnretainedValue()
                if recorder.inEmit.exchange(true, ordering: .acquiringAndReleasing) {
                    recorder.overlaps.add(1, ordering: .relaxed)
                }
                usleep(20_000)  // a host whose client reads slowly: a second caller arrives while this one is inside
                recorder.events.withLock { $0.append((event.pointee.type, event.pointee.code)) }
                recorder.inEmit.store(false, ordering: .releasing)
                if event.pointee.type == AFM_EVENT_DONE || event.pointee.type == AFM_EVENT_ERROR { recorder.terminal.signal() }
                return 0
            }
        }
    }

    /// What `generate` returned.
    struct Outcome {
        var status: afm_status
        var errorCode: Int32
        var message: String
        var recorder: Recorder
    }

    private let table: UnsafePointer<afm_backend_vtable>
    private let instance: OpaquePointer

    /// Loads the library (never unloaded), negotiates and creates an instance.
    init() throws {
        let path = TestPaths.binDirectory + "/libafm-backend-kit-fixture.so"
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "afm_backend_negotiate") else {
            throw Failure(description: "cannot load \(path): \(dlerror().map { String(cString: $0) } ?? "?") (swift build makes it)")
        }
        let negotiate = unsafeBitCast(symbol, to: afm_backend_negotiate_fn.self)
        let host = UnsafeMutablePointer<afm_host_api>.allocate(capacity: 1)  // lives until the process exits
        host.initialize(to: afm_host_api())
        host.pointee.struct_size = UInt32(MemoryLayout<afm_host_api>.size)
        host.pointee.abi_major = UInt32(AFM_ABI_MAJOR)
        host.pointee.abi_minor = UInt32(AFM_ABI_MINOR)
        var info = afm_backend_info()
        info.struct_size = UInt32(MemoryLayout<afm_backend_info>.size)
        var error = Self.error()
        guard negotiate(host, &info, &error) == AFM_OK, let table = info.vtable else {
            throw Failure(description: "negotiation failed: \(Self.message(&error))")
        }
        let config = Array(#"{"config_version":1,"backend":"kit-fixture","instance":"kit-fixture#1","generation":1,"settings":{}}"#.utf8)
        var out: OpaquePointer?
        let status = config.withUnsafeBufferPointer { bytes in
            bytes.withMemoryRebound(to: CChar.self) {
                table.pointee.create(host, afm_str(data: $0.baseAddress, size: UInt64($0.count)), &out, &error)
            }
        }
        guard status == AFM_OK, let out else { throw Failure(description: "create failed: \(Self.message(&error))") }
        self.table = table
        instance = out
    }

    /// `generate` with `request` (a whole document) and a fresh recorder.
    func generate(_ request: String) -> Outcome {
        let recorder = Recorder()
        var error = Self.error()
        let bytes = Array(request.utf8)
        let status = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                table.pointee.generate(instance, 1, afm_str(data: $0.baseAddress, size: UInt64($0.count)), recorder.sink, &error)
            }
        }
        return Outcome(status: status, errorCode: error.code, message: Self.message(&error), recorder: recorder)
    }

    /// A generation request for `model`.
    static func request(model: String) -> String {
        #"{"request_version":1,"response_id":"resp_kit","model":"\#(model)","system":[],"input":[],"tools":[],"#
            + #""tool_choice":{"mode":"auto"},"parallel_tool_calls":true,"max_output_tokens":16,"stream":true}"#
    }

    func destroy() { table.pointee.destroy(instance) }

    private static func error() -> afm_error {
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        return error
    }

    private static func message(_ error: inout afm_error) -> String {
        withUnsafeBytes(of: &error.message) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }
}
