// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMSchema
import Testing

/// Output schemas (purpose `.output`) and the check of answers against them.
@Suite struct SchemaInstanceValidatorTests {
    func normalized(_ schema: String) throws(ToolSchemaError) -> JSONValue {
        try ToolSchemaValidator.validate(json(schema), path: "text.format.schema", purpose: .output).normalized
    }

    func violation(_ value: String, _ schema: String) throws -> SchemaViolation? {
        SchemaInstanceValidator(schema: try normalized(schema)).violation(of: json(value))
    }

    @Test func theTopOfAnOutputSchemaMayBeAnySchemaButAnEmptyOne() throws {
        #expect(try normalized(#"{"type":"string"}"#) == json(#"{"type":"string"}"#))
        #expect(
            try normalized(#"{"anyOf":[{"type":"object","properties":{}},{"type":"array","items":{"type":"integer"}}]}"#)
                == json(
                    #"{"anyOf":[{"type":"object","properties":{},"additionalProperties":false},{"type":"array","items":{"type":"integer"}}]}"#))
        for empty in [#"{}"#, #"{"title":"T"}"#] {
            do {
                _ = try normalized(empty)
                Issue.record("accepted \(empty)")
            } catch {
                #expect(error.path == "text.format.schema")
                #expect(error.message.contains("json_object"))
            }
        }
        // The same top for tool parameters stays the "no arguments" object.
        let tool = try ToolSchemaValidator.validate(json("{}"), path: "tools[0].parameters").normalized
        #expect(tool == json(#"{"type":"object","properties":{},"additionalProperties":false}"#))
    }

    static let city = #"""
        {"$defs":{"Street":{"type":"object","properties":{"name":{"type":"string"},"km":{"type":"number","exclusiveMinimum":0}},"required":["name","km"]}},
         "type":"object",
         "properties":{"name":{"type":"string"},"kind":{"enum":["capital","town"]},"mayor":{"anyOf":[{"type":"string"},{"type":"null"}]},
                       "population":{"type":"integer","minimum":0,"maximum":100000000},"tags":{"type":"array","items":{"type":"string"},"minItems":1,"maxItems":2},
                       "streets":{"type":"array","items":{"$ref":"#/$defs/Street"}},"flag":{"const":true}},
         "required":["name","kind","mayor","population"]}
        """#

    @Test(arguments: [
        #"{"name":"Paris","kind":"capital","mayor":null,"population":2}"#,
        #"{"kind":"town","name":"Lyon","mayor":"X","population":2.0,"tags":["a"],"streets":[{"km":1e0,"name":"r"}],"flag":true}"#,
        #"  {"name":"", "kind":"town", "mayor":null, "population":0}  "#,
    ])
    func valuesThatMatch(_ value: String) throws {
        #expect(try violation(value, Self.city) == nil)
    }

    @Test(arguments: [
        (#"{"kind":"capital","mayor":null,"population":2}"#, "$", "\"name\" is missing"),
        (#"{"name":"P","kind":"village","mayor":null,"population":2}"#, "$.kind", "enum"),
        (#"{"name":"P","kind":"town","mayor":3,"population":2}"#, "$.mayor", "expected string"),
        (#"{"name":"P","kind":"town","mayor":null,"population":2.5}"#, "$.population", "expected integer"),
        (#"{"name":"P","kind":"town","mayor":null,"population":-1}"#, "$.population", "below minimum"),
        (#"{"name":"P","kind":"town","mayor":null,"population":100000001}"#, "$.population", "above maximum"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"tags":[]}"#, "$.tags", "minItems"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"tags":["a","b","c"]}"#, "$.tags", "maxItems"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"tags":[1]}"#, "$.tags[0]", "expected string"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"streets":[{"name":"a","km":0}]}"#, "$.streets[0].km", "exclusiveMinimum"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"streets":[{"name":"a"}]}"#, "$.streets[0]", "\"km\" is missing"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"flag":false}"#, "$.flag", "const"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"other":1}"#, "$.other", "not in the schema"),
        (#"{"name":"P","kind":"town","mayor":null,"population":1,"a b":1}"#, #"$["a b"]"#, "not in the schema"),
        (#"["name"]"#, "$", "expected object"),
    ])
    func valuesThatDoNotMatchNameThePlace(_ testCase: (value: String, path: String, fragment: String)) throws {
        let problem = try #require(try violation(testCase.value, Self.city))
        #expect(problem.path == testCase.path)
        #expect(problem.message.contains(testCase.fragment), "\(problem)")
    }

    @Test func recursiveSchemasCheckNestedValues() throws {
        let tree = ##"{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["v","kids"]}"##
        #expect(try violation(#"{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]}"#, tree) == nil)
        let problem = try #require(try violation(#"{"v":1,"kids":[{"v":2,"kids":[{"v":"x","kids":[]}]}]}"#, tree))
        #expect(problem.path == "$.kids[0].kids[0].v")
    }

    @Test func unionsTryEveryBranch() throws {
        let schema = #"""
            {"$defs":{"Cat":{"type":"object","properties":{"meow":{"type":"boolean"}},"required":["meow"]},
                      "Dog":{"type":"object","properties":{"bark":{"type":"integer"}},"required":["bark"]}},
             "anyOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"},{"type":"string"},{"type":"null"}]}
            """#
        for value in [#"{"meow":true}"#, #"{"bark":3}"#, #""fish""#, "null"] {
            #expect(try violation(value, schema) == nil, "\(value)")
        }
        let problem = try #require(try violation(#"{"bark":"loud"}"#, schema))
        #expect(problem.path == "$")
        #expect(problem.message.contains("none of the anyOf branches"))
    }

    @Test func enumsCompareJSONValuesNotSpellings() throws {
        let schema = #"{"type":"object","properties":{"n":{"enum":[1,{"a":[1,2],"b":null}]}},"required":["n"]}"#
        #expect(try violation(#"{"n":1.0}"#, schema) == nil)
        #expect(try violation(#"{"n":{"b":null,"a":[1,2]}}"#, schema) == nil)
        #expect(try violation(#"{"n":{"a":[2,1],"b":null}}"#, schema) != nil)
    }

    /// Numbers in enum/const compare by exact value: through a Double, 9007199254740993 equalled 9007199254740992 and
    /// 1e400 equalled 2e400 (both infinite).
    @Test func enumNumbersCompareExactly() throws {
        let schema = #"{"type":"object","properties":{"n":{"enum":[9007199254740993,1e400,0.1]},"c":{"const":-0}},"required":["n"]}"#
        #expect(try violation(#"{"n":9007199254740992}"#, schema) != nil)
        #expect(try violation(#"{"n":2e400}"#, schema) != nil)
        #expect(try violation(#"{"n":0.10000000000000001}"#, schema) != nil)
        for same in ["9007199254740993", "9007199254740993.0", "90071992547409930e-1", "1e400", "10e399", "0.1", "0.10", "1e-1"] {
            #expect(try violation(#"{"n":\#(same)}"#, schema) == nil, "\(same)")
        }
        for zero in ["0", "-0", "0.0", "0e7"] {
            #expect(try violation(#"{"n":0.1,"c":\#(zero)}"#, schema) == nil, "\(zero)")
        }
        #expect(try violation(#"{"n":0.1,"c":1e-400}"#, schema) != nil)
    }

    /// Numeric bounds compare by exact value: through a Double, an integer beyond 2^53 (a private-cloud upstream writes
    /// what it likes) or a decimal past a bound by less than a Double's precision slipped the bound.
    @Test func numberBoundsCompareExactly() throws {
        let schema = #"""
            {"type":"object","properties":{
              "big":{"type":"number","maximum":9007199254740992},
              "low":{"type":"number","minimum":-9007199254740992},
              "tenth":{"type":"number","maximum":0.1},
              "open":{"type":"number","exclusiveMaximum":9007199254740993},
              "above":{"type":"number","exclusiveMinimum":0.3},
              "sign":{"type":"number","minimum":0,"maximum":0}},
             "required":[]}
            """#
        let slipped = [
            #"{"big":9007199254740993}"#, #"{"big":9007199254740992.5}"#, #"{"big":90071992547409921e-1}"#,
            #"{"low":-9007199254740993}"#, #"{"tenth":0.10000000000000000001}"#, #"{"tenth":1000000000000000000001e-22}"#,
            #"{"open":9007199254740993}"#, #"{"open":9007199254740994}"#, #"{"above":0.3}"#, #"{"above":0.29999999999999999999}"#,
            #"{"big":1e400}"#, #"{"low":-1e400}"#,
            // Exponents beyond an Int (they were compared as Doubles: ±0.0 and ±infinity).
            #"{"sign":-1e-99999999999999999999}"#, #"{"sign":1e-99999999999999999999}"#, #"{"big":1e99999999999999999999}"#,
        ]
        for value in slipped {
            #expect(try violation(value, schema) != nil, "\(value) passed")
        }
        let within = [
            #"{"big":9007199254740992}"#, #"{"big":9007199254740992.0}"#, #"{"big":9.007199254740992e15}"#, #"{"low":-9007199254740992}"#,
            #"{"tenth":0.1}"#, #"{"tenth":0.09999999999999999999}"#, #"{"tenth":1e-400}"#, #"{"open":9007199254740992.999}"#,
            #"{"above":0.30000000000000000001}"#, #"{"tenth":-1e400}"#, #"{"sign":-0.0e-99999999999999999999}"#,
            #"{"sign":0e99999999999999999999}"#,
        ]
        for value in within {
            #expect(try violation(value, schema) == nil, "\(value) refused")
        }
        // Normalization compares bounds the same way: of two lower bounds equal as Doubles it keeps the tighter
        // (it kept `exclusiveMinimum: 0.1` over `minimum: 0.10000000000000000001`, letting 0.100000000000000000005
        // through), and a range empty only in exact arithmetic is refused.
        let tighter = #"{"type":"number","minimum":0.10000000000000000001,"exclusiveMinimum":0.1}"#
        #expect(try normalized(tighter) == json(#"{"type":"number","minimum":0.10000000000000000001}"#))
        #expect(try violation("0.100000000000000000005", tighter) != nil)
        #expect(throws: ToolSchemaError.self) { try normalized(#"{"type":"number","minimum":0.10000000000000000001,"maximum":0.1}"#) }
    }

    /// Keywords the subset keeps only as description text are not checked: they were never promised.
    @Test func unenforcedKeywordsAreNotChecked() throws {
        let schema = #"{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]+$","format":"email"}},"required":["code"]}"#
        #expect(try violation(#"{"code":"lowercase and long"}"#, schema) == nil)
    }

    /// String lengths are enforced and count code points (an escaped surrogate pair is one character).
    @Test func stringLengthsCountCodePoints() throws {
        let schema = #"{"type":"object","properties":{"code":{"type":"string","minLength":2,"maxLength":3}},"required":["code"]}"#
        #expect(try violation(#"{"code":"ab"}"#, schema) == nil)
        #expect(try violation(#"{"code":"äöü"}"#, schema) == nil)
        #expect(try violation(#"{"code":"a\ud83d\ude00"}"#, schema) == nil)
        #expect(try violation(#"{"code":"\ud83d\ude00"}"#, schema)?.message == "length 1 is below minLength 2")
        #expect(try violation(#"{"code":"abcd"}"#, schema)?.message == "length 4 is above maxLength 3")
    }

    /// A recursive union of two object branches: checking a nested answer against the first branch checks the
    /// whole subtree before the member that rules the branch out, then the second branch checks it again. Without
    /// remembered verdicts that was 2^depth steps for a valid answer of a few hundred bytes (depth 60 never ended).
    @Test(.timeLimit(.minutes(1))) func recursiveUnionsCostLinearTime() throws {
        let schema = #"""
            {"$defs":{"N":{"anyOf":[
              {"type":"object","properties":{"a":{"$ref":"#/$defs/N"},"x":{"const":1}},"required":["x"]},
              {"type":"object","properties":{"a":{"$ref":"#/$defs/N"},"x":{"const":2}},"required":["x"]}]}},
             "$ref":"#/$defs/N"}
            """#
        func nested(_ depth: Int, leaf: Int) -> String {
            (0..<depth).reduce(#"{"x":\#(leaf)}"#) { inner, _ in #"{"a":\#(inner),"x":2}"# }
        }
        #expect(try violation(nested(60, leaf: 2), schema) == nil)
        let deep = try #require(try violation(nested(60, leaf: 3), schema))
        #expect(deep.path == "$")
        #expect(deep.message.contains("matches none of the anyOf branches"))
    }
}
