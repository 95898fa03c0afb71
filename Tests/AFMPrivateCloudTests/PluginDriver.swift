// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import CAFMBackendABI
import Foundation
import Synchronization

/// Loads the private-cloud plugin with dlopen and drives its C ABI directly, as a host would, for assertions on
/// what the host does not show (the describe extension fields, refusal messages, the event sequence).
final class PluginDriver {
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var description: String
    }

    /// Events a generation sent, collected from the sink.
    final class Events: @unchecked Sendable {
        // Safety: every field is guarded by `lock`; the sink's emit calls are serialized per generation.
        private let lock = NSLock()
        private var list: [(type: Int32, code: Int32, index: Int32, text: String, name: String, input: Int64, output: Int64)] = []
        private let terminal = DispatchSemaphore(value: 0)

        func append(_ event: afm_event) {
            let text = event.text.data.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(event.text.size)), as: UTF8.self) } ?? ""
            let name = event.name.data.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(event.name.size)), as: UTF8.self) } ?? ""
            lock.withLock { list.append((event.type, event.code, event.index, text, name, event.input_tokens, event.output_tokens)) }
            if event.type == AFM_EVENT_DONE || event.type == AFM_EVENT_ERROR { terminal.signal() }
        }

        var all: [(type: Int32, code: Int32, index: Int32, text: String, name: String, input: Int64, output: Int64)] {
            lock.withLock { list }
        }

        /// Waits for the terminal event.
        func waitForTerminal(seconds: Int = 120) -> Bool { terminal.wait(timeout: .now() + .seconds(seconds)) == .success }

        var text: String { all.filter { $0.type == AFM_EVENT_TEXT_DELTA }.map(\.text).joined() }
        var last: (type: Int32, code: Int32, text: String)? { all.last.map { ($0.type, $0.code, $0.text) } }
    }

    private static let logLines = Mutex<[String]>([])
    /// Every line the plugin logged through the host API, in every driver of this process.
    static var logged: [String] { logLines.withLock { $0 } }

    private let vtable: UnsafePointer<afm_backend_vtable>
    private let instance: OpaquePointer
    /// The host table every driver passes (KitFixtureDriver's too): one for the process, because a plugin may keep
    /// the pointer while it stays loaded (it is never unloaded). A table per driver, never freed, was a leak
    /// LeakSanitizer reported (`make test-asan`: 34 reports from this initializer). Written once, before any thread
    /// can read it.
    nonisolated(unsafe) static let hostTable: UnsafeMutablePointer<afm_host_api> = {
        var host = afm_host_api()
        host.struct_size = UInt32(MemoryLayout<afm_host_api>.size)
        host.abi_major = UInt32(AFM_ABI_MAJOR)
        host.abi_minor = UInt32(AFM_ABI_MINOR)
        host.log = { _, _, message in
            let text = message.data.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(message.size)), as: UTF8.self) } ?? ""
            PluginDriver.logLines.withLock { $0.append(text) }
        }
        let table = UnsafeMutablePointer<afm_host_api>.allocate(capacity: 1)
        table.initialize(to: host)
        return table
    }()
    private var sinks: [UnsafeMutablePointer<afm_event_sink>] = []

    /// Loads the library (once per process; it is never unloaded) and creates an instance.
    init(settings: [String: String], stateDirectory: String? = nil) throws {
        guard let handle = dlopen(CloudPaths.library, RTLD_NOW | RTLD_LOCAL),
            let symbol = dlsym(handle, "afm_backend_negotiate")
        else { throw Failure(code: -1, description: "dlopen: \(String(cString: dlerror()))") }
        let negotiate = unsafeBitCast(symbol, to: afm_backend_negotiate_fn.self)
        let hostTable = Self.hostTable
        var info = afm_backend_info()
        info.struct_size = UInt32(MemoryLayout<afm_backend_info>.size)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        guard negotiate(hostTable, &info, &error) == AFM_OK, let vtable = info.vtable else {
            throw Failure(code: error.code, description: Self.message(error))
        }
        self.vtable = vtable
        var document: [String: Any] = [
            "config_version": 1, "backend": "private-cloud", "instance": "private-cloud#1", "generation": 1,
            "settings": settings,
        ]
        if let stateDirectory { document["state_dir"] = stateDirectory }
        let config = try JSONSerialization.data(withJSONObject: document)
        var out: OpaquePointer?
        let status = config.withUnsafeBytes { bytes in
            vtable.pointee.create(
                hostTable, afm_str(data: bytes.baseAddress?.assumingMemoryBound(to: CChar.self), size: UInt64(bytes.count)),
                &out, &error)
        }
        guard status == AFM_OK, let out else { throw Failure(code: status, description: Self.message(error)) }
        instance = out
    }

    /// The describe document, parsed.
    func describe() throws -> JSONValue {
        final class Collector { var bytes: [UInt8] = [] }
        let collector = Collector()
        var writer = afm_writer()
        writer.struct_size = UInt32(MemoryLayout<afm_writer>.size)
        writer.ctx = Unmanaged.passUnretained(collector).toOpaque()
        writer.write = { context, bytes in
            let collector = Unmanaged<Collector>.fromOpaque(context!).takeUnretainedValue()
            if let data = bytes.data { collector.bytes += UnsafeRawBufferPointer(start: data, count: Int(bytes.size)) }
        }
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        guard vtable.pointee.describe(instance, &writer, &error) == AFM_OK else {
            throw Failure(code: error.code, description: Self.message(error))
        }
        return try withExtendedLifetime(collector) { try JSONParser.parse(collector.bytes) }
    }

    /// The raw describe text.
    func describeText() throws -> String { try describe().jsonString }

    /// Starts a generation; throws the refusal (code and message) when generate refuses.
    func generate(id: UInt64, request: String) throws -> Events {
        let events = Events()
        let sink = UnsafeMutablePointer<afm_event_sink>.allocate(capacity: 1)  // freed in deinit, after the terminal
        sink.initialize(to: afm_event_sink())
        sink.pointee.struct_size = UInt32(MemoryLayout<afm_event_sink>.size)
        sink.pointee.ctx = Unmanaged.passRetained(events).toOpaque()
        sink.pointee.emit = { context, event in
            guard let context, let event else { return 1 }
            Unmanaged<Events>.fromOpaque(context).takeUnretainedValue().append(event.pointee)
            return 0
        }
        sinks.append(sink)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let bytes = Array(request.utf8)
        let status = bytes.withUnsafeBufferPointer { buffer in
            buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { pointer in
                vtable.pointee.generate(instance, id, afm_str(data: pointer, size: UInt64(buffer.count)), sink, &error)
            }
        }
        guard status == AFM_OK else { throw Failure(code: status, description: Self.message(error)) }
        return events
    }

    func cancel(id: UInt64) { vtable.pointee.cancel(instance, id) }

    /// Destroys the instance (after every generation ended).
    func destroy() { vtable.pointee.destroy(instance) }

    deinit {
        for sink in sinks {
            Unmanaged<Events>.fromOpaque(sink.pointee.ctx).release()
            sink.deallocate()
        }
    }

    private static func message(_ error: afm_error) -> String {
        withUnsafeBytes(of: error.message) { String(cString: $0.bindMemory(to: CChar.self).baseAddress!) }
    }
}

/// A generation request document with one user message.
func generationRequest(
    model: String = "private-cloud", text: String = "Say hello.", maxOutputTokens: Int = 16, extra: String = ""
) -> String {
    #"{"request_version":1,"response_id":"resp_test","model":"\#(model)","system":["Be brief."],"input":[{"type":"message","role":"user","content":[{"type":"text","text":"\#(text)"}]}],"tools":[],"tool_choice":{"mode":"auto"},"parallel_tool_calls":true,"max_output_tokens":\#(maxOutputTokens),"temperature":null,"top_p":null,"reasoning_effort":null,"stream":true\#(extra)}"#
}
