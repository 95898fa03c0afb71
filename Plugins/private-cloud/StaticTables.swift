// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI

/// The backend's static vtable.
///
/// The header requires it to stay valid until the process exits, so it is allocated once (on first negotiation,
/// through Swift's thread-safe lazy global initialisation) and never freed.
///
/// Safety: `@unchecked Sendable` because it holds a raw pointer. The pointee is written once in `init`, before the
/// `shared` global is published, and only read afterwards (by the host, from any thread).
final class StaticTables: @unchecked Sendable {
    /// The one instance, created on first use.
    static let shared = StaticTables()

    /// The vtable `afm_backend_info.vtable` points at.
    let vtable: UnsafePointer<afm_backend_vtable>

    private init() {
        let vtable = UnsafeMutablePointer<afm_backend_vtable>.allocate(capacity: 1)
        vtable.initialize(
            to: afm_backend_vtable(
                struct_size: UInt32(MemoryLayout<afm_backend_vtable>.size),
                reserved0: 0,
                create: PrivateCloudBackend.create,
                describe: PrivateCloudBackend.describe,
                generate: PrivateCloudBackend.generate,
                cancel: PrivateCloudBackend.cancel,
                destroy: PrivateCloudBackend.destroy,
                get_extension: PrivateCloudBackend.getExtension))
        self.vtable = UnsafePointer(vtable)
    }
}
