// SPDX-License-Identifier: Apache-2.0
import AFMBridge
import AFMCore
import CAFMBridge
import Glibc

// The C functions of libafm-bridge.so (afm_bridge.h). Nothing here traps on input: NULL pointers and bad
// configs are status codes, bad messages are JSON-RPC errors delivered through the callback.

/// `afm_bridge_open`: parses the config, starts the delivery thread, hands out the handle's id (``BridgeRegistry``).
@c(afm_bridge_open)
public func afmBridgeOpen(
    _ config: UnsafePointer<CChar>?, _ callback: afm_bridge_callback?, _ userData: UnsafeMutableRawPointer?,
    _ out: UnsafeMutablePointer<OpaquePointer?>?, _ error: UnsafeMutablePointer<CChar>?, _ errorSize: UInt64
) -> afm_bridge_status {
    func fail(_ status: Int32, _ message: String) -> afm_bridge_status {
        if let error, errorSize > 0 {
            let bytes = Array(message.utf8.prefix(Int(min(errorSize - 1, UInt64(Int32.max)))))
            for (index, byte) in bytes.enumerated() { error[index] = CChar(bitPattern: byte) }
            error[bytes.count] = 0
        }
        return status
    }
    guard let callback else { return fail(AFM_BRIDGE_ERR_INVALID_ARGUMENT, "afm_bridge_open: callback is NULL") }
    guard let out else { return fail(AFM_BRIDGE_ERR_INVALID_ARGUMENT, "afm_bridge_open: out is NULL") }
    let configuration: BridgeConfiguration
    do {
        let text = config.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: strlen($0)), as: UTF8.self) }
        configuration = try BridgeConfiguration(json: text ?? "")
    } catch {
        return fail(AFM_BRIDGE_ERR_INVALID_CONFIG, "afm_bridge_open: \(error.message)")
    }
    let handle: BridgeHandle
    do {
        handle = try BridgeHandle(configuration: configuration, callback: .init(function: callback, userData: userData))
    } catch {
        return fail(AFM_BRIDGE_ERR_RESOURCES, "afm_bridge_open: cannot start the delivery thread: \(error)")
    }
    // The id as the opaque pointer: never 0, never an address, never reused.
    out.pointee = OpaquePointer(bitPattern: BridgeRegistry.shared.register(handle))
    return AFM_BRIDGE_OK
}

/// `afm_bridge_send`: hands one message to the dispatcher (which queues its answer). A send that races
/// `afm_bridge_close` either is taken (its answer is delivered before the close returns) or answers
/// `AFM_BRIDGE_ERR_CLOSED`: never `AFM_BRIDGE_OK` without an answer.
@c(afm_bridge_send)
public func afmBridgeSend(_ bridge: OpaquePointer?, _ json: UnsafePointer<CChar>?, _ size: UInt64) -> afm_bridge_status {
    guard let bridge else { return AFM_BRIDGE_ERR_INVALID_ARGUMENT }
    guard json != nil || size == 0 else { return AFM_BRIDGE_ERR_INVALID_ARGUMENT }
    // Closed, closing or never a handle: refused without touching memory. Found: held until the send returns.
    guard let handle = BridgeRegistry.shared.handle(UInt(bitPattern: bridge)) else { return AFM_BRIDGE_ERR_CLOSED }
    guard let json, size > 0 else {
        return handle.bridge.receive(ArraySlice<UInt8>()) ? AFM_BRIDGE_OK : AFM_BRIDGE_ERR_CLOSED
    }
    // A message over the limit is refused by the dispatcher from its size: only one byte more than the limit is
    // copied, never the whole message.
    let count = Int(min(size, UInt64(handle.bridge.configuration.maxMessageBytes + 1)))
    var bytes = Array(UnsafeRawBufferPointer(start: json, count: count))
    if UInt64(count) == size, bytes.last == 0x0A { bytes.removeLast() }
    // False: a close began after the lookup above (and before the message was taken).
    return handle.bridge.receive(bytes[...]) ? AFM_BRIDGE_OK : AFM_BRIDGE_ERR_CLOSED
}

/// `afm_bridge_close`: ends everything the handle holds, then forgets it (a second close finds nothing).
@c(afm_bridge_close)
public func afmBridgeClose(_ bridge: OpaquePointer?) -> afm_bridge_status {
    guard let bridge else { return AFM_BRIDGE_ERR_INVALID_ARGUMENT }
    let id = UInt(bitPattern: bridge)
    switch BridgeRegistry.shared.beginClose(id) {
    case .failure(.closed): return AFM_BRIDGE_ERR_CLOSED
    case .failure(.wouldWaitForItself): return AFM_BRIDGE_ERR_WRONG_THREAD
    case .success(let (handle, caller)):
        handle.close()
        BridgeRegistry.shared.endClose(id, caller: caller)
        return AFM_BRIDGE_OK
    }
}

/// The version text, made once and kept for the life of the library.
///
/// Safety: `@unchecked Sendable` because it holds a raw pointer. The bytes are written once, by `strdup` during
/// the static's initialization (which Swift runs exactly once, thread-safely), never written again and never freed.
private struct VersionText: @unchecked Sendable {
    let pointer: UnsafePointer<CChar>
    static let shared = VersionText(
        pointer: UnsafePointer(strdup("\(AFMVersion.string) (protocol \(Bridge.protocolVersion))")!))
}

/// `afm_bridge_version`.
@c(afm_bridge_version)
public func afmBridgeVersion() -> UnsafePointer<CChar> {
    VersionText.shared.pointer
}
