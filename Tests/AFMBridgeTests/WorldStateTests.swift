// SPDX-License-Identifier: Apache-2.0
import AFMBridge
import AFMGame
import AFMJSON
import AFMTestSupport
import Testing

/// The world's facts: set, merge patches (RFC 7386), revisions, and the text a turn gets.
struct WorldStateTests {
    @Test func aPatchMergesObjectsAndNullRemoves() throws {
        let world = WorldState()
        #expect(world.turnContext() == nil)
        #expect(try world.set(["time": "dusk", "door": ["open": false, "lock": "iron"], "guards": 2]) == 1)
        #expect(try world.patch(["door": ["open": true, "lock": .null], "guards": .null, "weather": "rain"]) == 2)
        let (facts, revision) = world.snapshot
        #expect(revision == 2)
        #expect(JSONValue.object(facts) == ["time": "dusk", "door": ["open": true], "weather": "rain"])
        let context = world.turnContext() ?? ""
        #expect(context.contains("revision 2"))
        #expect(context.contains(#"{"time":"dusk","door":{"open":true},"weather":"rain"}"#))
    }
}

/// The world's size is bounded: every NPC turn carries all of it, and patches with new keys would otherwise grow it
/// (and every turn's input) without end.
struct WorldLimitTests {
    @Test func patchesThatWouldGrowTheWorldPastItsLimitAreRefusedAndChangeNothing() throws {
        let received = BridgeRunEndTests.Received()
        let outbox = try BridgeOutbox { bytes in
            received.add(bytes)
            return true
        }
        let bridge = Bridge(outbox: outbox)
        let value = String(repeating: "v", count: 16 << 10)
        // 64 patches of 16 KiB, each with a new key: 1 MiB in all.
        for index in 0..<64 {
            bridge.receive(#"{"jsonrpc":"2.0","id":\#(index),"method":"world.patch","params":{"patch":{"k\#(index)":"\#(value)"}}}"#)
        }
        bridge.receive(#"{"jsonrpc":"2.0","id":100,"method":"world.get"}"#)
        #expect(waitUntil { received.result(id: 100) != nil })
        outbox.finish()
        let refused = received.messages.withLock { $0.filter { $0["error"]?["code"] == -32602 } }
        #expect(!refused.isEmpty, "every patch was accepted: the world grew to 1 MiB")
        #expect(refused.first?["error"]?["data"]?["field"] == "patch")
        let world = try #require(received.result(id: 100))
        #expect((world["facts"]?.jsonString.utf8.count ?? .max) <= WorldState.defaultMaxBytes)
        // A refused patch changed nothing: the revision counts the accepted ones only.
        #expect(world["revision"] == .number(JSONNumber(64 - refused.count)))
    }
}
