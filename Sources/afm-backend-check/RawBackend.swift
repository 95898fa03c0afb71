// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A backend library opened the way the host opens one, driven through the bare ABI.
///
/// The checker does not use AFMBackends' host here: the host tolerates (drops, clamps, times out) exactly the
/// mistakes the checker must see. Everything a backend is handed stays valid until the process exits (host tables,
/// sinks, writers), so even a broken backend cannot make the checker read freed memory.
final class RawBackend: Sendable {
    /// What one negotiation returned.
    struct Negotiation {
        var status: afm_status
        var info: afm_backend_info
        var errorCode: Int32
        var message: String
    }

    let path: String
    private let negotiateFunction: afm_backend_negotiate_fn

    /// Opens `path` (RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, never closed) and finds the entry point.
    init(path: String) throws(CheckFailure) {
        guard let handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE) else {
            throw CheckFailure("dlopen failed: \(dlerror().map { String(cString: $0) } ?? "unknown error")")
        }
        guard let symbol = dlsym(handle, "afm_backend_negotiate") else {
            throw CheckFailure("the library has no afm_backend_negotiate")
        }
        self.path = path
        negotiateFunction = unsafeBitCast(symbol, to: afm_backend_negotiate_fn.self)
    }

    /// A host table offering ABI `major.minor`, allocated once and never freed (the header: host-owned, valid until
    /// the process exits).
    static func hostTable(major: UInt32, minor: UInt32) -> UnsafePointer<afm_host_api> {
        let table = UnsafeMutablePointer<afm_host_api>.allocate(capacity: 1)
        var host = afm_host_api()
        host.struct_size = UInt32(MemoryLayout<afm_host_api>.size)
        host.abi_major = major
        host.abi_minor = minor
        // No check judges log lines, so none is kept: they were kept in a list nothing read, and a backend logging in
        // a loop grew the check's child past the GiB (1 GiB of lines, 2.1 GB resident) until the deadline.
        host.log = { _, _, _ in }
        host.get_extension = { _, _ in nil }
        table.initialize(to: host)
        return UnsafePointer(table)
    }

    /// Calls `afm_backend_negotiate` with a host offering `major.minor`.
    func negotiate(major: UInt32 = UInt32(AFM_ABI_MAJOR), minor: UInt32 = UInt32(AFM_ABI_MINOR)) -> Negotiation {
        var info = afm_backend_info()
        info.struct_size = UInt32(MemoryLayout<afm_backend_info>.size)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = negotiateFunction(Self.hostTable(major: major, minor: minor), &info, &error)
        return Negotiation(status: status, info: info, errorCode: error.code, message: Self.message(of: &error))
    }

    /// What a negotiation by a host of a later minor saw: its `afm_backend_info` is 8 bytes longer (struct_size
    /// 48), and those 8 bytes hold a pattern.
    struct LaterHostNegotiation {
        var status: afm_status
        var structSize: UInt32
        var tailIntact: Bool
    }

    /// The 8 bytes past the ABI 1.0 `afm_backend_info` in `negotiateAsLaterHost()`.
    static let tailPattern: UInt64 = 0xA5A5_5A5A_C3C3_3C3C

    /// Calls `afm_backend_negotiate` as a host whose `afm_backend_info` has grown by one field.
    func negotiateAsLaterHost() -> LaterHostNegotiation {
        let size = MemoryLayout<afm_backend_info>.size + 8
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: size, alignment: 8)
        defer { buffer.deallocate() }
        buffer.initializeMemory(as: UInt8.self, repeating: 0, count: size)
        let info = buffer.bindMemory(to: afm_backend_info.self, capacity: 1)
        info.pointee.struct_size = UInt32(size)
        buffer.storeBytes(of: Self.tailPattern, toByteOffset: MemoryLayout<afm_backend_info>.size, as: UInt64.self)
        var error = afm_error()
        error.struct_size = UInt32(MemoryLayout<afm_error>.size)
        let status = negotiateFunction(
            Self.hostTable(major: UInt32(AFM_ABI_MAJOR), minor: UInt32(AFM_ABI_MINOR) + 1), info, &error)
        return LaterHostNegotiation(
            status: status, structSize: info.pointee.struct_size,
            tailIntact: buffer.load(fromByteOffset: MemoryLayout<afm_backend_info>.size, as: UInt64.self) == Self.tailPattern)
    }

    /// Calls `afm_backend_negotiate` with an `afm_backend_info` and an `afm_error` of 8 bytes each (struct_size 8),
    /// each placed just before a page the process may not touch: a backend that reads or writes past a struct_size
    /// crashes here.
    ///
    /// - Returns: the status and the `code` the backend wrote into the short error (0 when none).
    func negotiateWithShortStructs() -> (status: afm_status, errorCode: Int32) {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        // Two pages for each struct, never unmapped (a backend may keep a pointer); the second is inaccessible.
        func guarded(_ size: Int) -> UnsafeMutableRawPointer {
            let base = mmap(nil, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)!
            mprotect(base + page, page, PROT_NONE)
            return base + page - size
        }
        let info = guarded(8)
        info.storeBytes(of: UInt32(8), as: UInt32.self)
        let error = guarded(8)
        error.storeBytes(of: UInt32(8), as: UInt32.self)
        error.storeBytes(of: Int32(0), toByteOffset: 4, as: Int32.self)
        let status = negotiateFunction(
            Self.hostTable(major: UInt32(AFM_ABI_MAJOR), minor: UInt32(AFM_ABI_MINOR)),
            info.assumingMemoryBound(to: afm_backend_info.self), error.assumingMemoryBound(to: afm_error.self))
        return (status, error.load(fromByteOffset: 4, as: Int32.self))
    }

    /// A negotiated library's function table, or a failure naming what is wrong with the negotiation.
    func vtable() throws(CheckFailure) -> (id: String, table: UnsafePointer<afm_backend_vtable>) {
        let result = negotiate()
        guard result.status == AFM_OK else {
            throw CheckFailure("negotiation refused ABI \(AFM_ABI_MAJOR).\(AFM_ABI_MINOR): \(result.message)")
        }
        guard let table = result.info.vtable, table.pointee.struct_size >= AFM_BACKEND_VTABLE_SIZE_1_0,
            table.pointee.create != nil, table.pointee.describe != nil, table.pointee.generate != nil,
            table.pointee.cancel != nil, table.pointee.destroy != nil
        else { throw CheckFailure("negotiation returned no usable function table") }
        return (result.info.id.map { String(cString: $0) } ?? "", table)
    }

    /// The message of a filled `afm_error` (up to its NUL, at most the array's size).
    static func message(of error: inout afm_error) -> String {
        withUnsafeBytes(of: &error.message) { raw in
            let bytes = raw.prefix(while: { $0 != 0 })
            return String(decoding: bytes, as: UTF8.self)
        }
    }
}

/// A failure that ends one check, with what the checker saw.
struct CheckFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
