// SPDX-License-Identifier: Apache-2.0
import AFMBackendKit

/// The one exported symbol: negotiates the ABI with the host for `PrivateCloudInstance` (AFMBackendKit does the
/// checks and hands the host its static vtable; `PrivateCloudInstance` is the `AFMBackend` behind it).
@c(afm_backend_negotiate)
public func afmBackendNegotiate(
    _ host: UnsafePointer<afm_host_api>?, _ out: UnsafeMutablePointer<afm_backend_info>?,
    _ error: UnsafeMutablePointer<afm_error>?
) -> afm_status {
    BackendKit.negotiate(PrivateCloudInstance.self, host: host, out: out, error: error)
}
