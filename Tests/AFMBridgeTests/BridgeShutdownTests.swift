// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMJSON
import AFMTestSupport
import Dispatch
import Synchronization
import Testing

@testable import AFMBridge

/// How `shutdown` requests and ``Bridge/close()`` end a bridge (review of the bridge, session 10): repeated
/// `shutdown` lines, a message that arrives while or after the bridge closes, a close from `onShutdownRequest`.
@Suite(.serialized)
struct BridgeShutdownTests {
    static func makeBridge(
        _ received: BridgeRunEndTests.Received, onShutdownRequest: @escaping @Sendable () -> Void = {}
    ) throws -> Bridge {
        let outbox = try BridgeOutbox { bytes in
            received.add(bytes)
            return true
        }
        return Bridge(
            configuration: BridgeConfiguration(url: ServerURL(host: "127.0.0.1", port: 9, pathPrefix: ""), model: "m"),
            outbox: outbox, onShutdownRequest: onShutdownRequest)
    }

    /// Every `shutdown` line is answered, and they share one shutdown: before, each line added a task to a list kept
    /// until close (a host repeating `shutdown` grew the bridge without bound).
    @Test func repeatedShutdownsAreAllAnsweredWithoutATaskEach() throws {
        let received = BridgeRunEndTests.Received()
        let bridge = try Self.makeBridge(received)
        for id in 1...500 { #expect(bridge.receive(#"{"jsonrpc":"2.0","id":\#(id),"method":"shutdown"}"#)) }
        #expect(waitUntil { (1...500).allSatisfy { received.result(id: $0) != nil } })
        // Answered and forgotten: nothing kept per request.
        #expect(bridge.state.withLock { $0.shutdownWaiting.isEmpty && $0.shutdownAnswered })
        bridge.receive(#"{"jsonrpc":"2.0","id":501,"method":"shutdown"}"#)
        #expect(waitUntil { received.result(id: 501) != nil })
        bridge.close()
        #expect(received.messages.withLock { $0.count } == 501)
    }

    /// A message handed to the bridge after ``Bridge/close()`` (an `afm_bridge_send` that found its handle just before
    /// a racing `afm_bridge_close`) is refused, never silently dropped: before, its answer was queued to a finished
    /// outbox and lost, and the sender was told it was handled.
    @Test func aMessageAfterCloseIsRefusedNotLost() throws {
        let received = BridgeRunEndTests.Received()
        let bridge = try Self.makeBridge(received)
        bridge.close()
        #expect(!bridge.receive(#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#), "the ping after close was taken")
        #expect(!received.messages.withLock { $0.contains { $0["id"] == 7 } })
    }

    /// `onShutdownRequest` may close the bridge: before, `close()` called there waited for the shutdown request's own
    /// task, which was waiting for it (a deadlock, with a cooperative thread blocked for good).
    @Test func closeFromOnShutdownRequestDoesNotDeadlock() throws {
        let received = BridgeRunEndTests.Received()
        let holder = Mutex<Bridge?>(nil)
        let closed = DispatchSemaphore(value: 0)
        let bridge = try Self.makeBridge(received) {
            holder.withLock { $0 }?.close()
            closed.signal()
        }
        holder.withLock { $0 = bridge }
        bridge.receive(#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#)
        #expect(closed.wait(timeout: .now() + 30) == .success, "close() from onShutdownRequest did not return within 30 s")
        #expect(received.result(id: 1) != nil)
        holder.withLock { $0 = nil }
    }
}
