// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI
import Synchronization

/// The ABI negotiation of a backend written with the kit, and the registration of its type.
///
/// A backend's library exports exactly one C symbol, `afm_backend_negotiate`, written in the backend's module (the
/// kit cannot export it: Swift runs no code of a library before its first call, so nothing could tell the kit
/// which type to serve) as one call to `negotiate(_:host:out:error:)`. That call registers the type, and hands
/// the host a static `afm_backend_info` naming the backend and pointing at the kit's static vtable.
///
/// One library serves one backend: every copy of the kit is linked into its backend's library (with the library's
/// other symbols hidden, `Sources/AFMBackendKit/exports.map`), so two backends loaded side by side never share it.
public enum BackendKit {
    /// The backend type this library serves, set by the first negotiation.
    struct Registration: Sendable {
        let type: any AFMBackend.Type
    }

    private static let registered = Mutex<Registration?>(nil)

    /// The registered backend type, or nil before the first negotiation.
    static var registration: Registration? { registered.withLock { $0 } }

    /// Answers `afm_backend_negotiate` for `backend`: checks the host's ABI major and struct sizes, registers the
    /// type and fills `out` (id, version, the ABI version the kit was built for, the static vtable).
    ///
    /// Cheap, as the ABI requires (no threads, no I/O); the host may call it more than once.
    ///
    /// - Returns: `AFM_OK`, or `AFM_ERR_INCOMPATIBLE` with a message naming both versions when the majors differ,
    ///   a struct is too small for ABI 1.0, or the library already negotiated for another backend type.
    public static func negotiate<Backend: AFMBackend>(
        _ backend: Backend.Type, host: UnsafePointer<afm_host_api>?, out: UnsafeMutablePointer<afm_backend_info>?,
        error: UnsafeMutablePointer<afm_error>?
    ) -> afm_status {
        let name = "\(Backend.id) backend"
        guard let host, let out else {
            return BackendError.incompatible("afm_backend_negotiate: host or out is NULL").report(into: error)
        }
        // abi_major and abi_minor end at offset 12; a host table shorter than that cannot be read at all.
        guard host.pointee.struct_size >= 12 else {
            return BackendError.incompatible(
                "\(name): host afm_host_api struct_size \(host.pointee.struct_size) is too small"
            ).report(into: error)
        }
        guard host.pointee.abi_major == AFM_ABI_MAJOR else {
            return BackendError.incompatible(
                "\(name) speaks AFM ABI \(AFM_ABI_MAJOR).\(AFM_ABI_MINOR); host offered "
                    + "\(host.pointee.abi_major).\(host.pointee.abi_minor)"
            ).report(into: error)
        }
        guard out.pointee.struct_size >= AFM_BACKEND_INFO_SIZE_1_0 else {
            return BackendError.incompatible(
                "\(name): host afm_backend_info struct_size \(out.pointee.struct_size) is smaller than "
                    + "\(AFM_BACKEND_INFO_SIZE_1_0) (ABI 1.0)"
            ).report(into: error)
        }
        let refusal: String? = registered.withLock { registration in
            guard let existing = registration else {
                registration = Registration(type: backend)
                return nil
            }
            guard ObjectIdentifier(existing.type) == ObjectIdentifier(backend) else {
                return "this library already serves the \(existing.type.id) backend; one library serves one backend"
            }
            return nil
        }
        if let refusal { return BackendError.incompatible("\(name): \(refusal)").report(into: error) }
        // The ABI 1.0 fields only (the guard above found room for them); struct_size stays as the host set it.
        out.pointee.abi_major = UInt32(AFM_ABI_MAJOR)
        out.pointee.abi_minor = UInt32(AFM_ABI_MINOR)
        out.pointee.reserved0 = 0
        out.pointee.id = cString(Backend.id)
        out.pointee.version = cString(Backend.version)
        out.pointee.vtable = StaticTables.shared.vtable
        return AFM_OK
    }

    /// A static, NUL-terminated C string for a string literal (literals live in the binary's read-only data).
    private static func cString(_ string: StaticString) -> UnsafePointer<CChar> {
        UnsafeRawPointer(string.utf8Start).assumingMemoryBound(to: CChar.self)
    }
}
