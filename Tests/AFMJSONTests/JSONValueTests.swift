// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Testing

@Suite("JSONValue")
struct JSONValueTests {
    @Test("literals build the expected encoding, keeping dictionary order")
    func literals() {
        let value: JSONValue = [
            "b": 1, "a": 2.5, "s": "x\"y", "t": true, "f": false, "n": nil, "arr": [1, "two", [], [:]],
            "nested": ["z": [], "y": nil],
        ]
        #expect(
            value.jsonString
                == #"{"b":1,"a":2.5,"s":"x\"y","t":true,"f":false,"n":null,"arr":[1,"two",[],{}],"nested":{"z":[],"y":null}}"#
        )
        let order: JSONValue = ["b": 1, "a": 2]
        #expect(order.encoded() == Array(#"{"b":1,"a":2}"#.utf8))
        let float: JSONValue = 2.0
        #expect(float.jsonString == "2.0")
        let negative: JSONValue = -7
        #expect(negative.jsonString == "-7")
    }

    @Test("typed accessors return values only for their own case")
    func accessors() {
        let values: [JSONValue] = [nil, true, 3, "s", [1], ["k": 1]]
        #expect(values.map(\.typeName) == ["null", "boolean", "number", "string", "array", "object"])
        #expect(values.map(\.isNull) == [true, false, false, false, false, false])
        #expect(values.map { $0.boolValue != nil } == [false, true, false, false, false, false])
        #expect(values.map { $0.numberValue != nil } == [false, false, true, false, false, false])
        #expect(values.map { $0.stringValue != nil } == [false, false, false, true, false, false])
        #expect(values.map { $0.arrayValue != nil } == [false, false, false, false, true, false])
        #expect(values.map { $0.objectValue != nil } == [false, false, false, false, false, true])
        #expect(values[1].boolValue == true)
        #expect(values[2].numberValue == JSONNumber(3))
        #expect(values[3].stringValue == "s")
        #expect(values[4].arrayValue == [1])
        #expect(values[5].objectValue == ["k": 1])
    }

    @Test("nonNull is nil for null only, so `?? default` replaces both absent and null members")
    func nonNullIsNilForNullOnly() {
        let object: JSONValue = ["a": nil, "b": 0, "c": false, "d": ""]
        #expect(object["a"]?.nonNull == nil)
        #expect(object["a"]?.nonNull ?? "default" == "default")
        #expect(object["missing"]?.nonNull ?? "default" == "default")
        #expect(object["b"]?.nonNull == 0)
        #expect(object["c"]?.nonNull == false)
        #expect(object["d"]?.nonNull == "")
    }

    @Test("subscripts look into objects and arrays and return nil otherwise")
    func subscripts() {
        let value: JSONValue = ["list": [10, 20, ["deep": "yes"]], "n": 1]
        #expect(value["list"]?[0] == 10)
        #expect(value["list"]?[2]?["deep"]?.stringValue == "yes")
        #expect(value["list"]?[3] == nil)
        #expect(value["list"]?[-1] == nil)
        #expect(value["missing"] == nil)
        #expect(value["n"]?["x"] == nil)
        #expect(value[0] == nil)
        #expect(JSONValue.string("abc")[0] == nil)
        #expect(JSONValue.null["k"] == nil)
    }

    @Test("equality is structural")
    func equality() {
        let a: JSONValue = ["x": [1, "y", nil]]
        let b: JSONValue = .object(JSONObject([("x", .array([.number(JSONNumber(1)), .string("y"), .null]))]))
        #expect(a == b)
        #expect(a.hashValue == b.hashValue)
        #expect(a != ["x": [1, "y"]])
        #expect(JSONValue.number(JSONNumber(1)) != .number(JSONNumber(1.0)))
        #expect(JSONValue.bool(false) != .null)
        #expect(JSONValue.string("1") != 1)
    }

    @Test("description is the compact JSON")
    func description() {
        let value: JSONValue = ["a": [true, nil]]
        #expect(value.description == #"{"a":[true,null]}"#)
        #expect("\(value)" == value.jsonString)
    }
}
