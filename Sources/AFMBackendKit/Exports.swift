// SPDX-License-Identifier: Apache-2.0

// A backend written with the kit sees the ABI's C types (`afm_status`, `AFM_EVENT_*`, `AFM_ERR_*`, `AFM_LOG_*`)
// through `import AFMBackendKit` alone.
@_exported import CAFMBackendABI
