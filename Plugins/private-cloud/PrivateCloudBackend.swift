// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI

/// The private-cloud backend's identity and its ABI negotiation.
///
/// The shared object exports exactly one C symbol, `afm_backend_negotiate` (below). It hands the host a static
/// `afm_backend_info` naming the backend and pointing at a static vtable whose slots are the capture-free C thunks
/// in `PrivateCloudBackend+EntryPoints.swift`.
enum PrivateCloudBackend {
    /// The stable backend id (also the manifest id).
    static let id: StaticString = "private-cloud"
    /// The backend's own version, reported at negotiation and in describe.
    private static let versionCString: StaticString = "1.0.0"
    static let version = versionCString.description

    /// Answers `afm_backend_negotiate`: checks the host's ABI major and fills `out`.
    ///
    /// - Returns: `AFM_OK`, or `AFM_ERR_INCOMPATIBLE` with a message naming both versions when the majors differ
    ///   or a struct is too small for ABI 1.0.
    static func negotiate(
        host: UnsafePointer<afm_host_api>?, out: UnsafeMutablePointer<afm_backend_info>?,
        error: UnsafeMutablePointer<afm_error>?
    ) -> afm_status {
        guard let host, let out else {
            return BackendError.incompatible("afm_backend_negotiate: host or out is NULL").report(into: error)
        }
        // abi_major and abi_minor end at offset 12; a host table shorter than that cannot be read at all.
        guard host.pointee.struct_size >= 12 else {
            return BackendError.incompatible(
                "private-cloud backend: host afm_host_api struct_size \(host.pointee.struct_size) is too small"
            ).report(into: error)
        }
        guard host.pointee.abi_major == AFM_ABI_MAJOR else {
            return BackendError.incompatible(
                "private-cloud backend speaks AFM ABI \(AFM_ABI_MAJOR).\(AFM_ABI_MINOR); host offered "
                    + "\(host.pointee.abi_major).\(host.pointee.abi_minor)"
            ).report(into: error)
        }
        guard out.pointee.struct_size >= AFM_BACKEND_INFO_SIZE_1_0 else {
            return BackendError.incompatible(
                "private-cloud backend: host afm_backend_info struct_size \(out.pointee.struct_size) is smaller than "
                    + "\(AFM_BACKEND_INFO_SIZE_1_0) (ABI 1.0)"
            ).report(into: error)
        }
        out.pointee.struct_size = UInt32(MemoryLayout<afm_backend_info>.size)
        out.pointee.abi_major = UInt32(AFM_ABI_MAJOR)
        out.pointee.abi_minor = UInt32(AFM_ABI_MINOR)
        out.pointee.reserved0 = 0
        out.pointee.id = cString(id)
        out.pointee.version = cString(versionCString)
        out.pointee.vtable = StaticTables.shared.vtable
        return AFM_OK
    }

    /// A static, NUL-terminated C string for a string literal (literals live in the binary's read-only data).
    private static func cString(_ string: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}

/// The one exported symbol: negotiates ABI 1.0 with the host. See `PrivateCloudBackend.negotiate(host:out:error:)`.
@c(afm_backend_negotiate)
public func afmBackendNegotiate(
    _ host: UnsafePointer<afm_host_api>?, _ out: UnsafeMutablePointer<afm_backend_info>?,
    _ error: UnsafeMutablePointer<afm_error>?
) -> afm_status {
    PrivateCloudBackend.negotiate(host: host, out: out, error: error)
}
