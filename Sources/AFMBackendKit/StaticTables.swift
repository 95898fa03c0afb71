// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI

/// The backend's static C tables: the vtable and the `afm.tokenize/1` extension table.
///
/// The header requires both to stay valid until the process exits, so they are allocated once (on first
/// negotiation, through Swift's thread-safe lazy global initialisation) and never freed. Their slots are the
/// kit's `EntryPoints`, the same for every backend: the backend's type is found through `BackendKit`'s
/// registration and its instance through the `afm_instance *` the host passes back.
///
/// Safety: `@unchecked Sendable` because it holds raw pointers. The pointees are written once in `init`, before
/// the `shared` global is published, and only read afterwards (by the host, from any thread).
final class StaticTables: @unchecked Sendable {
    /// The one instance, created on first use.
    static let shared = StaticTables()

    /// The vtable `afm_backend_info.vtable` points at.
    let vtable: UnsafePointer<afm_backend_vtable>
    /// The table `get_extension("afm.tokenize/1")` returns (for a `TokenCountingBackend`).
    let tokenize: UnsafePointer<afm_ext_tokenize>

    private init() {
        let vtable = UnsafeMutablePointer<afm_backend_vtable>.allocate(capacity: 1)
        vtable.initialize(
            to: afm_backend_vtable(
                struct_size: UInt32(MemoryLayout<afm_backend_vtable>.size),
                reserved0: 0,
                create: EntryPoints.create,
                describe: EntryPoints.describe,
                generate: EntryPoints.generate,
                cancel: EntryPoints.cancel,
                destroy: EntryPoints.destroy,
                get_extension: EntryPoints.getExtension))
        let tokenize = UnsafeMutablePointer<afm_ext_tokenize>.allocate(capacity: 1)
        tokenize.initialize(
            to: afm_ext_tokenize(
                struct_size: UInt32(MemoryLayout<afm_ext_tokenize>.size),
                reserved0: 0,
                count_input_tokens: EntryPoints.countInputTokens))
        self.vtable = UnsafePointer(vtable)
        self.tokenize = UnsafePointer(tokenize)
    }
}
