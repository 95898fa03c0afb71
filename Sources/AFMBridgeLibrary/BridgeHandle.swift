// SPDX-License-Identifier: Apache-2.0
import AFMBridge
import CAFMBridge
import Dispatch

/// What an `afm_bridge *` points to: the dispatcher and its outbox, whose delivery thread calls the host's
/// callback. C sees only its id in ``BridgeRegistry``, which holds it from `afm_bridge_open` to the end of
/// `afm_bridge_close`.
final class BridgeHandle: Sendable {
    let bridge: Bridge
    let outbox: BridgeOutbox

    /// The host's callback and its user data.
    ///
    /// Safety: `@unchecked Sendable` because it holds the host's raw `user_data` pointer. afm_bridge.h makes the
    /// callback callable on the handle's delivery thread, which is the only thread that calls it, and the pointer
    /// is never dereferenced here, only passed back.
    struct Callback: @unchecked Sendable {
        let function: afm_bridge_callback
        let userData: UnsafeMutableRawPointer?

        func deliver(_ message: [UInt8]) {
            var bytes = message
            bytes.append(0)  // the header promises json[size] == 0
            bytes.withUnsafeBufferPointer { buffer in
                buffer.baseAddress!.withMemoryRebound(to: CChar.self, capacity: buffer.count) { pointer in
                    function(userData, pointer, UInt64(message.count))
                }
            }
        }
    }

    init(configuration: BridgeConfiguration, callback: Callback) throws {
        outbox = try BridgeOutbox(name: "afm-bridge-cb") { message in
            callback.deliver(message)
            return true
        }
        bridge = Bridge(configuration: configuration, outbox: outbox)
    }

    /// Ends every run and agent, delivers what is queued and stops the delivery thread; blocks the calling thread
    /// (a host thread, never one of Swift's cooperative pool) until all of it is done.
    func close() {
        bridge.close()
    }
}
