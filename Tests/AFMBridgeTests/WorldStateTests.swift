// SPDX-License-Identifier: Apache-2.0
import AFMGame
import AFMJSON
import Testing

/// The world's facts: set, merge patches (RFC 7386), revisions, and the text a turn gets.
struct WorldStateTests {
    @Test func aPatchMergesObjectsAndNullRemoves() {
        let world = WorldState()
        #expect(world.turnContext() == nil)
        #expect(world.set(["time": "dusk", "door": ["open": false, "lock": "iron"], "guards": 2]) == 1)
        #expect(world.patch(["door": ["open": true, "lock": .null], "guards": .null, "weather": "rain"]) == 2)
        let (facts, revision) = world.snapshot
        #expect(revision == 2)
        #expect(JSONValue.object(facts) == ["time": "dusk", "door": ["open": true], "weather": "rain"])
        let context = world.turnContext() ?? ""
        #expect(context.contains("revision 2"))
        #expect(context.contains(#"{"time":"dusk","door":{"open":true},"weather":"rain"}"#))
    }
}
