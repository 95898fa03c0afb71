// SPDX-License-Identifier: Apache-2.0
import CAFMBackendABI

/// A failure a backend reports across the ABI: an `AFM_ERR_*` code and a human-readable message.
///
/// Every C entry point of the kit catches these (there are no others: a backend never traps on input) and turns
/// them into a status code plus a filled `afm_error`; a generation sends one as a terminal `AFM_EVENT_ERROR`.
public struct BackendError: Error, Sendable, Hashable {
    /// One of the `AFM_ERR_*` constants.
    public var code: afm_status
    /// What went wrong, for the host's log and (for request errors) the client. No secrets.
    public var message: String

    public init(_ code: afm_status, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func invalidRequest(_ message: String) -> BackendError { BackendError(AFM_ERR_INVALID_REQUEST, message) }
    public static func modelUnavailable(_ message: String) -> BackendError {
        BackendError(AFM_ERR_MODEL_UNAVAILABLE, message)
    }
    public static func incompatible(_ message: String) -> BackendError { BackendError(AFM_ERR_INCOMPATIBLE, message) }
    public static func `internal`(_ message: String) -> BackendError { BackendError(AFM_ERR_INTERNAL, message) }

    /// The code that crosses the ABI for `code`: itself when it is a refusal code of the table
    /// (`AFM_ERR_INVALID_REQUEST` … `AFM_ERR_INCOMPATIBLE`), else `AFM_ERR_INTERNAL`.
    ///
    /// A backend bug must not reach the host as something else: a refusal with 0 (`AFM_OK`) would tell the host
    /// that `generate` accepted the request, and it would wait for a terminal event that never comes.
    public static func abiCode(_ code: afm_status) -> afm_status {
        (AFM_ERR_INVALID_REQUEST...AFM_ERR_INCOMPATIBLE).contains(code) ? code : AFM_ERR_INTERNAL
    }

    /// Writes this error into a caller-allocated `afm_error`, respecting its `struct_size`.
    ///
    /// The message is truncated to fit, at a UTF-8 character boundary, and always NUL-terminated. A NULL
    /// `error` or one too small to hold `code` is left alone. A code outside the table becomes `AFM_ERR_INTERNAL`
    /// (`abiCode(_:)`), its message saying which code the backend gave.
    ///
    /// - Returns: the code that crossed the ABI, so callers can `return error.report(into: pointer)`.
    @discardableResult
    public func report(into error: UnsafeMutablePointer<afm_error>?) -> afm_status {
        BackendError.write(code: code, message: message, into: error)
        return Self.abiCode(code)
    }

    /// Fills `error` with `abiCode(code)` and `message` (see `report(into:)`).
    public static func write(code: afm_status, message: String, into error: UnsafeMutablePointer<afm_error>?) {
        let crossing = abiCode(code)
        let shown = crossing == code ? message : message + " (the backend gave error code \(code), not one of the table)"
        guard let error else { return }
        let size = Int(error.pointee.struct_size)
        // The 1.0 layout: struct_size (4), code (4), message[512]. Only touch what the caller says it has.
        guard let codeOffset = MemoryLayout<afm_error>.offset(of: \.code),
            let messageOffset = MemoryLayout<afm_error>.offset(of: \.message),
            size >= codeOffset + MemoryLayout<Int32>.size
        else { return }
        error.pointee.code = crossing
        let capacity = min(size, MemoryLayout<afm_error>.size) - messageOffset
        guard capacity > 0 else { return }
        let base = UnsafeMutableRawPointer(error).advanced(by: messageOffset)
        let utf8 = Array(shown.utf8)
        var count = min(utf8.count, capacity - 1)
        // Never cut a multi-byte character in half: back up over continuation bytes (10xxxxxx).
        if count < utf8.count {
            while count > 0, utf8[count] & 0xC0 == 0x80 { count -= 1 }
        }
        utf8.withUnsafeBytes { bytes in
            if count > 0, let source = bytes.baseAddress { base.copyMemory(from: source, byteCount: count) }
        }
        base.storeBytes(of: 0, toByteOffset: count, as: UInt8.self)
    }
}
