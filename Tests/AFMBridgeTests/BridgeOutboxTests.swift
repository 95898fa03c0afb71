// SPDX-License-Identifier: Apache-2.0
import AFMBridge
import AFMJSON
import Dispatch
import Synchronization
import Testing

/// The outbox's bound: a host that stops reading cannot make it grow past its cap with streamed events.
struct BridgeOutboxTests {
    @Test func droppableMessagesAreRefusedPastTheCapAndAnswersStillQueue() throws {
        let release = DispatchSemaphore(value: 0)
        let delivered = Mutex<[String]>([])
        let outbox = try BridgeOutbox(maxQueuedBytes: 4096) { bytes in
            // The host reads the first message, then stops reading until released.
            release.wait()
            delivered.withLock { $0.append(String(decoding: bytes, as: UTF8.self)) }
            return true
        }
        let event: JSONValue = ["text": .string(String(repeating: "x", count: 200))]
        var accepted = 0
        var refused = 0
        for _ in 0..<1000 {
            if outbox.send(event, droppable: true) { accepted += 1 } else { refused += 1 }
        }
        // At most the cap (plus the one message the delivery thread took) is held; the rest is refused.
        #expect(accepted > 0 && accepted <= 4096 / 200 + 2)
        #expect(refused == 1000 - accepted)
        #expect(outbox.queuedBytes <= 4096)
        // An answer is never refused, even past the cap.
        #expect(outbox.send(["id": 1, "result": [:]]))
        for _ in 0..<(accepted + 1) { release.signal() }
        outbox.finish()
        let messages = delivered.withLock { $0 }
        #expect(messages.count == accepted + 1)
        #expect(messages.last?.contains(#""result""#) == true)
        #expect(outbox.queuedBytes == 0)
        // After finish nothing is queued.
        #expect(!outbox.send(event))
    }
}
