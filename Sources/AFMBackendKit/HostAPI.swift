// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI

/// The host's `afm_host_api`, kept for logging (`create` receives it; an instance keeps it for its lifetime).
///
/// Safety: `@unchecked Sendable` because it holds a raw pointer. The header makes the table host-owned, immutable
/// and valid until the process exits, and `log` is `[thread-safe]`; this type only reads the table.
public struct HostAPI: @unchecked Sendable {
    private let table: UnsafePointer<afm_host_api>?

    /// Wraps the table `create()` received (NULL is tolerated: logging then does nothing).
    public init(_ table: UnsafePointer<afm_host_api>?) {
        self.table = table
    }

    /// Writes one line to the host's log at an `AFM_LOG_*` level, if the host offers `log`.
    public func log(_ level: Int32, _ message: String) {
        guard let table else { return }
        // `log` ends at offset 32 in the 1.0 layout; only call it if the host's struct reaches that far.
        guard let offset = MemoryLayout<afm_host_api>.offset(of: \.log),
            Int(table.pointee.struct_size) >= offset + MemoryLayout<UnsafeRawPointer>.size,
            let log = table.pointee.log
        else { return }
        var message = message
        message.withUTF8 { bytes in
            let data = bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
            log(table.pointee.host_ctx, level, afm_str(data: data, size: UInt64(bytes.count)))
        }
    }
}
