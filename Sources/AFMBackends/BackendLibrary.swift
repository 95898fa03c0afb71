// SPDX-License-Identifier: Apache-2.0
import AFMCore
import AFMLogging
import CAFMBackendABI
import Foundation

/// A backend shared object, loaded once and kept for the life of the process.
///
/// Loading copies the `.so` to a generation-unique path first: glibc returns the already-loaded handle for a
/// path (or inode) it has seen, so a new version at the same path would silently be the old one
/// (reference/plugin-abi.md §3). The copy is opened with `RTLD_NOW|RTLD_LOCAL|RTLD_NODELETE` and never
/// `dlclose`d, because unloading a Swift image (or any image with thread-locals) is unsafe; a config or model
/// change creates a new *instance* in the same library instead.
public final class BackendLibrary: Sendable {
    /// The backend id the library reported during negotiation.
    public let backendID: String
    /// The backend's own version string.
    public let version: String
    /// The ABI version the backend was built against.
    public let abiMajor: UInt32
    public let abiMinor: UInt32
    /// The original path the library was loaded from, and the unique copy that is mapped.
    public let sourcePath: String
    public let loadedPath: String
    /// The loaded file's fingerprint: the registry compares it with the file to notice a replaced library.
    let fingerprint: FileFingerprint
    let vtable: VTable
    let host: HostHandle

    /// The backend's functions, checked non-NULL at load. Safety: the table is static in the backend and
    /// immutable (ABI rule), and the library is never unloaded, so the pointers stay valid on any thread.
    struct VTable: @unchecked Sendable {
        typealias Create = @convention(c) (UnsafePointer<afm_host_api>?, afm_str, UnsafeMutablePointer<OpaquePointer?>?, UnsafeMutablePointer<afm_error>?) -> afm_status
        let create: Create
        let describe: @convention(c) (OpaquePointer?, UnsafePointer<afm_writer>?, UnsafeMutablePointer<afm_error>?) -> afm_status
        let generate: @convention(c) (OpaquePointer?, UInt64, afm_str, UnsafePointer<afm_event_sink>?, UnsafeMutablePointer<afm_error>?) -> afm_status
        let cancel: @convention(c) (OpaquePointer?, UInt64) -> Void
        let destroy: @convention(c) (OpaquePointer?) -> Void
        let getExtension: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> UnsafeRawPointer?)?
    }

    /// The host API table handed to the backend; lives until the process exits (ABI rule).
    /// Safety: written once before negotiation and never mutated afterwards.
    struct HostHandle: @unchecked Sendable {
        let pointer: UnsafeMutablePointer<afm_host_api>
    }

    /// Loads, copies and negotiates the library a manifest names.
    ///
    /// - Parameters:
    ///   - manifest: the backend's manifest; its `abi_major` is checked before any code runs.
    ///   - copyDirectory: where generation-unique copies go (created if missing).
    ///   - uniqueName: a name unique in this process for the copy, e.g. `scripted-g3`.
    /// - Throws: `BackendLoadError` naming the file and, for version problems, both versions.
    public init(manifest: BackendManifest, copyDirectory: String, uniqueName: String, logger: Logger) throws(BackendLoadError) {
        let path = manifest.libraryPath
        guard manifest.abiMajor == Int(AFMVersion.abiMajor) else {
            throw BackendLoadError(
                path: manifest.manifestPath,
                "backend '\(manifest.id)' is built for AFM ABI \(manifest.abiMajor).x; this host speaks ABI \(AFMVersion.abiMajor).\(AFMVersion.abiMinor) (majors must match)",
                reason: "abi_mismatch")
        }
        let contents: Data
        do {
            contents = try Data(contentsOf: URL(fileURLWithPath: path))
        } catch {
            throw BackendLoadError(path: path, "cannot read backend library: \(error.localizedDescription)", reason: "dlopen_failed")
        }
        let copyPath = (copyDirectory as NSString).appendingPathComponent("\(uniqueName).so")
        do {
            try FileManager.default.createDirectory(atPath: copyDirectory, withIntermediateDirectories: true)
            try? FileManager.default.removeItem(atPath: copyPath)
            try contents.write(to: URL(fileURLWithPath: copyPath), options: .atomic)
        } catch {
            throw BackendLoadError(path: copyPath, "cannot write the load copy: \(error.localizedDescription)", reason: "dlopen_failed")
        }

        _ = dlerror()
        guard let handle = dlopen(copyPath, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            let reason = dlerror().map { String(cString: $0) } ?? "unknown dlopen error"
            throw BackendLoadError(path: path, "cannot load: \(reason)", reason: "dlopen_failed")
        }
        // No dlclose, ever: see the type's documentation.
        _ = dlerror()
        guard let symbol = dlsym(handle, "afm_backend_negotiate") else {
            throw BackendLoadError(
                path: path, "missing entry symbol 'afm_backend_negotiate' (is it exported with default visibility?)",
                reason: "missing_entry")
        }
        let negotiate = unsafeBitCast(symbol, to: afm_backend_negotiate_fn.self)

        let host = UnsafeMutablePointer<afm_host_api>.allocate(capacity: 1)
        let context = HostContext(logger: logger.with("backend", manifest.id))
        host.initialize(
            to: afm_host_api(
                struct_size: UInt32(MemoryLayout<afm_host_api>.size),
                abi_major: AFMVersion.abiMajor,
                abi_minor: AFMVersion.abiMinor,
                reserved0: 0,
                host_ctx: Unmanaged.passRetained(context).toOpaque(),  // lives as long as the library: forever
                log: hostLogTrampoline,
                get_extension: hostExtensionTrampoline
            ))

        var info = afm_backend_info()
        info.struct_size = UInt32(MemoryLayout<afm_backend_info>.size)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = negotiate(host, &info, &error)
        let backendMajor = info.abi_major
        let backendMinor = info.abi_minor
        if status != AFM_OK || backendMajor != AFMVersion.abiMajor {
            let detail = status != AFM_OK ? ": \(error.messageString)" : ""
            throw BackendLoadError(
                path: path,
                "negotiation failed: backend speaks AFM ABI \(backendMajor).\(backendMinor), this host speaks ABI \(AFMVersion.abiMajor).\(AFMVersion.abiMinor)\(detail)",
                reason: backendMajor != AFMVersion.abiMajor ? "abi_mismatch" : "negotiate_failed")
        }
        guard info.struct_size >= AFM_BACKEND_INFO_SIZE_1_0 else {
            throw BackendLoadError(
                path: path, "afm_backend_info.struct_size is \(info.struct_size), shorter than ABI 1.0's \(AFM_BACKEND_INFO_SIZE_1_0)",
                reason: "struct_too_short")
        }
        guard let table = info.vtable else {
            throw BackendLoadError(path: path, "negotiation returned no function table", reason: "negotiate_failed")
        }
        let tableSize = table.pointee.struct_size
        guard tableSize >= AFM_BACKEND_VTABLE_SIZE_1_0 else {
            throw BackendLoadError(
                path: path,
                "afm_backend_vtable.struct_size is \(tableSize), shorter than ABI 1.0's \(AFM_BACKEND_VTABLE_SIZE_1_0) (backend ABI \(backendMajor).\(backendMinor), host ABI \(AFMVersion.abiMajor).\(AFMVersion.abiMinor))",
                reason: "struct_too_short")
        }
        let functions = table.pointee
        guard let create = functions.create, let describe = functions.describe, let generate = functions.generate,
            let cancel = functions.cancel, let destroy = functions.destroy
        else {
            throw BackendLoadError(path: path, "function table has a NULL required function", reason: "negotiate_failed")
        }
        let reportedID = info.id.map { String(cString: $0) } ?? manifest.id
        guard reportedID == manifest.id else {
            throw BackendLoadError(
                path: path, "library reports backend id '\(reportedID)' but its manifest says '\(manifest.id)'",
                reason: "negotiate_failed")
        }

        self.backendID = reportedID
        self.version = info.version.map { String(cString: $0) } ?? "unknown"
        self.abiMajor = backendMajor
        self.abiMinor = backendMinor
        self.sourcePath = path
        self.loadedPath = copyPath
        self.fingerprint = contents.withUnsafeBytes { FileFingerprint(bytes: $0) }
        self.vtable = VTable(
            create: create, describe: describe, generate: generate, cancel: cancel, destroy: destroy,
            getExtension: functions.get_extension)
        self.host = HostHandle(pointer: host)
    }
}

/// What `host_ctx` points to: the backend's logger.
private final class HostContext: Sendable {
    let logger: Logger
    init(logger: Logger) { self.logger = logger }
}

private let hostLogTrampoline: @convention(c) (UnsafeMutableRawPointer?, Int32, afm_str) -> Void = { context, level, message in
    guard let context else { return }
    let host = Unmanaged<HostContext>.fromOpaque(context).takeUnretainedValue()
    let text = message.string(limit: 16 * 1024)
    let mapped: Logger.Level =
        switch level {
        case AFM_LOG_DEBUG: .debug
        case AFM_LOG_WARNING: .warning
        case AFM_LOG_ERROR: .error
        default: .info
        }
    host.logger.log(mapped, text)
}

private let hostExtensionTrampoline: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> UnsafeRawPointer? = { _, _ in
    nil  // The host offers no extensions in ABI 1.0.
}

extension afm_str {
    /// Copies the span into a String (invalid UTF-8 is repaired), reading at most `limit` bytes.
    func string(limit: Int = Int.max) -> String {
        guard let data, size > 0 else { return "" }
        let count = Int(min(size, UInt64(limit)))
        return data.withMemoryRebound(to: UInt8.self, capacity: count) {
            String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
        }
    }

    /// Copies the span's bytes.
    func bytes(limit: Int = Int.max) -> [UInt8] {
        guard let data, size > 0 else { return [] }
        let count = Int(min(size, UInt64(limit)))
        return data.withMemoryRebound(to: UInt8.self, capacity: count) {
            Array(UnsafeBufferPointer(start: $0, count: count))
        }
    }
}

extension afm_error {
    /// The NUL-terminated message, bounded by the array even if the backend forgot the NUL.
    var messageString: String {
        var copy = message
        return withUnsafeBytes(of: &copy) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.count
            return String(decoding: bytes[..<end], as: UTF8.self)
        }
    }
}
