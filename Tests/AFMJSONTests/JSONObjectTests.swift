// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

@Suite("JSONObject")
struct JSONObjectTests {
    @Test("an empty object")
    func empty() {
        let object = JSONObject()
        #expect(object.isEmpty)
        #expect(object.count == 0)
        #expect(object.keys == [])
        #expect(object["missing"] == nil)
        #expect(Array(object).isEmpty)
        #expect(JSONValue.object(object).jsonString == "{}")
    }

    @Test("setting a new key appends it at the end")
    func setAppends() {
        var object: JSONObject = ["b": 1, "a": 2]
        object["c"] = 3
        object["0"] = 4
        #expect(object.keys == ["b", "a", "c", "0"])
        #expect(object.count == 4)
        #expect(JSONValue.object(object).jsonString == #"{"b":1,"a":2,"c":3,"0":4}"#)
    }

    @Test("setting an existing key replaces the value in place")
    func setReplaces() {
        var object: JSONObject = ["b": 1, "a": 2, "c": 3]
        object["a"] = "two"
        #expect(object.keys == ["b", "a", "c"])
        #expect(object["a"] == "two")
        #expect(JSONValue.object(object).jsonString == #"{"b":1,"a":"two","c":3}"#)
        object["a"] = .null
        #expect(object["a"] == .null)
        #expect(object.count == 3)
    }

    @Test("setting nil removes the key and keeps the others in order")
    func setNilRemoves() {
        var object: JSONObject = ["b": 1, "a": 2, "c": 3]
        object["a"] = nil
        #expect(object.keys == ["b", "c"])
        #expect(object["a"] == nil)
        object["missing"] = nil
        #expect(object.keys == ["b", "c"])
        object["a"] = 9
        #expect(object.keys == ["b", "c", "a"])
        #expect(object.removeValue(forKey: "b") == 1)
        #expect(object.removeValue(forKey: "b") == nil)
        #expect(JSONValue.object(object).jsonString == #"{"c":3,"a":9}"#)
    }

    @Test("large objects keep order and correct lookups through inserts, replacements and removals")
    func largeObject() {
        var object = JSONObject()
        for i in 0..<100 { object["k\(i)"] = .number(JSONNumber(i)) }
        #expect(object.count == 100)
        #expect(object.keys == (0..<100).map { "k\($0)" })
        object["k50"] = nil
        #expect(object["k50"] == nil)
        #expect(object["k51"] == 51)
        #expect(object["k99"] == 99)
        object["k10"] = "ten"
        #expect(object.keys[10] == "k10")
        #expect(object["k10"] == "ten")
        object["k50"] = 500
        #expect(object.keys.last == "k50")
        #expect(object["k50"] == 500)
        // Shrink back below the index threshold and keep working.
        for i in 0..<95 where i != 50 { object["k\(i)"] = nil }
        #expect(object.keys == ["k95", "k96", "k97", "k98", "k99", "k50"])
        #expect(object["k97"] == 97)
        #expect(object.contains(key: "k98"))
        #expect(!object.contains(key: "k0"))
    }

    @Test("iteration yields members in order as (key:, value:) pairs")
    func iteration() {
        let object: JSONObject = ["z": 1, "y": true, "x": nil]
        var seen: [String] = []
        for (key, value) in object {
            seen.append("\(key)=\(value.jsonString)")
        }
        #expect(seen == ["z=1", "y=true", "x=null"])
        #expect(object.map(\.key) == ["z", "y", "x"])
        #expect(object.values == [1, true, nil])
        #expect(object.underestimatedCount == 3)
    }

    @Test("init from pairs keeps order; a repeated key updates the first position")
    func initFromPairs() {
        let object = JSONObject([("b", 1), ("a", 2), ("b", 3)])
        #expect(object.keys == ["b", "a"])
        #expect(object["b"] == 3)
        let many = JSONObject((0..<30).map { ("k\($0 % 20)", JSONValue.number(JSONNumber($0))) })
        #expect(many.count == 20)
        #expect(many["k5"] == 25)
        #expect(many.keys.first == "k0")
    }

    @Test("equality depends on order; hashing agrees with equality")
    func equality() {
        let ab: JSONObject = ["a": 1, "b": 2]
        let ab2 = JSONObject([("a", 1), ("b", 2)])
        let ba: JSONObject = ["b": 2, "a": 1]
        #expect(ab == ab2)
        #expect(ab.hashValue == ab2.hashValue)
        #expect(ab != ba)
        #expect(ab != ["a": 1, "b": 3])
        #expect(ab != ["a": 1])
        // A large object built by the parser equals one built by assignment.
        var built = JSONObject()
        for i in 0..<20 { built["k\(i)"] = .number(JSONNumber(i)) }
        let parsed = try? JSONParser.parse(JSONValue.object(built).encoded())
        #expect(parsed?.objectValue == built)
        #expect(parsed?.objectValue?.hashValue == built.hashValue)
    }
}
