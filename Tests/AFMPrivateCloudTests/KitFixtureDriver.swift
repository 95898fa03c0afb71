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
    final class Recorder: Sendable {
        let events = Mutex<[(type: Int32, code: Int32)]>([])
        let overlaps = Atomic<Int>(0)
        private let inEmit = Atomic<Bool>(false)
        let terminal = DispatchSemaphore(value: 0)

        /// The sink's `emit`: spends 20 ms on every event and counts a caller that arrives meanwhile.
        func record(_ event: afm_event) {
            if inEmit.exchange(true, ordering: .acquiringAndReleasing) {
                overlaps.add(1, ordering: .relaxed)
            }
            usleep(20_000)  // a host whose client reads slowly: a second caller arrives while this one is inside
            events.withLock { $0.append((event.type, event.code)) }
            inEmit.store(false, ordering: .releasing)
            if event.type == AFM_EVENT_DONE || event.type == AFM_EVENT_ERROR { terminal.signal() }
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
    /// The sinks of this driver's generations, each holding a reference to its recorder; `destroy` frees them.
    private var sinks: [UnsafeMutablePointer<afm_event_sink>] = []

    /// Loads the library (never unloaded), negotiates and creates an instance.
    init() throws {
        let path = TestPaths.binDirectory + "/libafm-backend-kit-fixture.so"
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL), let symbol = dlsym(handle, "afm_backend_negotiate") else {
            throw Failure(description: "cannot load \(path): \(dlerror().map { String(cString: $0) } ?? "?") (swift build makes it)")
        }
        let negotiate = unsafeBitCast(symbol, to: afm_backend_negotiate_fn.self)
        // The process-wide table (the ABI has it live until the process exits): one allocated per driver and
        // dropped was LeakSanitizer's direct leak from this initializer (BackendKitTests, make test-asan-ci).
        let host = PluginDriver.hostTable
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
        let sink = UnsafeMutablePointer<afm_event_sink>.allocate(capacity: 1)  // freed by `destroy`
        sink.initialize(to: afm_event_sink())
        sink.pointee.struct_size = UInt32(MemoryLayout<afm_event_sink>.size)
        sink.pointee.ctx = Unmanaged.passRetained(recorder).toOpaque()
        sink.pointee.emit = { context, event in
            guard let context, let event else { return 1 }
            Unmanaged<Recorder>.fromOpaque(context).takeUnretainedValue().record(event.pointee)
            return 0
        }
        sinks.append(sink)
        var error = Self.error()
        let bytes = Array(request.utf8)
        let status = bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) {
                table.pointee.generate(instance, 1, afm_str(data: $0.baseAddress, size: UInt64($0.count)), sink, &error)
            }
        }
        return Outcome(status: status, errorCode: error.code, message: Self.message(&error), recorder: recorder)
    }

    /// A generation request for `model`.
    static func request(model: String) -> String {
        #"{"request_version":1,"response_id":"resp_kit","model":"\#(model)","system":[],"input":[],"tools":[],"#
            + #""tool_choice":{"mode":"auto"},"parallel_tool_calls":true,"max_output_tokens":16,"stream":true}"#
    }

    /// Destroys the instance, then frees the sinks and drops their references to the recorders: the backend's
    /// `destroy` joined every thread it started (ABI), so nothing can call a sink any more. Sinks kept for good,
    /// each retaining its recorder (a cycle through the recorder's own pointer to it before), were LeakSanitizer's
    /// indirect leaks from `generate`.
    func destroy() {
        table.pointee.destroy(instance)
        for sink in sinks {
            if let context = sink.pointee.ctx { Unmanaged<Recorder>.fromOpaque(context).release() }
            sink.deinitialize(count: 1)
            sink.deallocate()
        }
        sinks = []
    }

    private static func error() -> afm_error {
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        return error
    }

    private static func message(_ error: inout afm_error) -> String {
        withUnsafeBytes(of: &error.message) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }
}
