// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMResponses

/// `afm-bench-check`: what the host's check of a structured answer costs (issue 14, "the check is cheap: measure
/// it"). For each representative answer it times `OutputFormat.check` — the exact call the pipeline makes before it
/// says `completed`: parse the answer, then walk it against the normalized schema (`SchemaInstanceValidator`) — and
/// prints one JSON line per answer with the median microseconds per check over the rounds (and the parse alone, for
/// the split). `scripts/bench-structured-check` runs it next to the same answers streamed through afmd.
///
/// Usage: afm-bench-check [--rounds N] [--min-milliseconds M]
@main
struct BenchMain {
    /// One answer and the schema it is checked against.
    struct Case {
        var name: String
        var schema: String
        var answer: String
    }

    static func main() {
        var rounds = 15
        var minimumMilliseconds = 100.0
        var arguments = CommandLine.arguments.dropFirst()
        while let argument = arguments.popFirst() {
            switch argument {
            case "--rounds": rounds = arguments.popFirst().flatMap { Int($0) } ?? rounds
            case "--min-milliseconds": minimumMilliseconds = arguments.popFirst().flatMap { Double($0) } ?? minimumMilliseconds
            default:
                print("usage: afm-bench-check [--rounds N] [--min-milliseconds M]")
                return
            }
        }
        for testCase in cases() {
            let format: OutputFormat
            do {
                let object = try JSONParser.parse(
                    #"{"type":"json_schema","name":"Bench","strict":true,"schema":\#(testCase.schema)}"#
                ).objectValue ?? [:]
                format = try OutputFormat.jsonSchema(object, param: "text.format")
            } catch {
                print("afm-bench-check: the \(testCase.name) schema was refused: \(error)")
                return
            }
            if let problem = format.check(testCase.answer) {
                print("afm-bench-check: the \(testCase.name) answer does not pass its own check: \(problem)")
                return
            }
            let bytes = Array(testCase.answer.utf8)
            let check = measure(rounds: rounds, minimumMilliseconds: minimumMilliseconds) { _ = format.check(testCase.answer) }
            let parse = measure(rounds: rounds, minimumMilliseconds: minimumMilliseconds) { _ = try? JSONParser.parse(bytes) }
            let line: JSONValue = [
                "case": .string(testCase.name), "bytes": .number(JSONNumber(bytes.count)), "schema": .string(testCase.schema),
                "answer": .string(testCase.answer), "check_us_median": .number(JSONNumber(rounded(check.median))),
                "check_us_min": .number(JSONNumber(rounded(check.minimum))), "parse_us_median": .number(JSONNumber(rounded(parse.median))),
                "rounds": .number(JSONNumber(rounds)),
            ]
            print(line.jsonString)
        }
    }

    /// Microseconds per call of `body`: each round repeats it until `minimumMilliseconds` passed (after one warm-up
    /// round); the median and the fastest round.
    static func measure(rounds: Int, minimumMilliseconds: Double, _ body: () -> Void) -> (median: Double, minimum: Double) {
        let clock = ContinuousClock()
        var perCall: [Double] = []
        for round in 0...rounds {
            var calls = 0
            let start = clock.now
            var elapsed = Duration.zero
            repeat {
                body()
                calls += 1
                elapsed = clock.now - start
            } while elapsed < .milliseconds(minimumMilliseconds)
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            if round > 0 { perCall.append(seconds * 1e6 / Double(calls)) }
        }
        perCall.sort()
        return (perCall[perCall.count / 2], perCall[0])
    }

    static func rounded(_ value: Double) -> Double { (value * 100).rounded() / 100 }

    /// The representative answers: a Pydantic-like nested object of about 1 KB, an array of 100 items, and a 16 KB
    /// answer.
    static func cases() -> [Case] {
        let city = #"""
            {"$defs":{"Kind":{"enum":["capital","town","village"],"type":"string"},
              "Street":{"type":"object","properties":{"name":{"type":"string","maxLength":40},"length_km":{"type":"number","minimum":0,"maximum":100},
                        "lanes":{"type":"integer","minimum":1,"maximum":8}},"required":["name","length_km","lanes"],"additionalProperties":false}},
             "type":"object",
             "properties":{"reasoning":{"type":"string","maxLength":400},"name":{"type":"string","maxLength":40},"kind":{"$ref":"#/$defs/Kind"},
                           "size":{"enum":["small","large"]},"mayor":{"anyOf":[{"type":"string"},{"type":"null"}]},
                           "population":{"type":"integer","minimum":0},"streets":{"type":"array","items":{"$ref":"#/$defs/Street"},"maxItems":10}},
             "required":["reasoning","name","kind","size","mayor","population","streets"],"additionalProperties":false}
            """#
        let streets = (0..<8).map { #"{"name":"Rue number \#($0) of the old town","length_km":\#(Double($0) * 1.25 + 0.5),"lanes":\#($0 % 4 + 1)}"# }
        let cityAnswer =
            #"{"reasoning":"Paris is the capital of France and by far its largest city; it has many long streets.","name":"Paris","kind":"capital","size":"large","mayor":"Anne Hidalgo","population":2102650,"streets":[\#(streets.joined(separator: ","))]}"#

        let list = #"""
            {"$defs":{"Item":{"type":"object","properties":{"id":{"type":"integer","minimum":0},"name":{"type":"string","maxLength":40},
                      "score":{"type":"number","minimum":0,"maximum":100},"tags":{"type":"array","items":{"type":"string"},"maxItems":3}},
                      "required":["id","name","score","tags"],"additionalProperties":false}},
             "type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/Item"},"minItems":100,"maxItems":100}},
             "required":["items"],"additionalProperties":false}
            """#
        let items = (0..<100).map { #"{"id":\#($0),"name":"item \#($0)","score":\#(Double($0 % 97) + 0.5),"tags":["a","b"]}"# }
        let listAnswer = #"{"items":[\#(items.joined(separator: ","))]}"#

        let report = #"""
            {"type":"object","properties":{"title":{"type":"string","maxLength":200},
              "sections":{"type":"array","items":{"type":"object","properties":{"heading":{"type":"string","maxLength":80},
                "body":{"type":"string","maxLength":2000},"confidence":{"type":"number","minimum":0,"maximum":1}},
                "required":["heading","body","confidence"],"additionalProperties":false},"maxItems":40}},
             "required":["title","sections"],"additionalProperties":false}
            """#
        let paragraph = String(repeating: "The quick brown fox jumps over the lazy dog. ", count: 9)
        let sections = (0..<37).map { #"{"heading":"Section \#($0)","body":"\#(paragraph)","confidence":0.\#($0 % 9 + 1)}"# }
        let reportAnswer = #"{"title":"A long structured report","sections":[\#(sections.joined(separator: ","))]}"#

        return [
            Case(name: "nested object ~1 KB", schema: city, answer: cityAnswer),
            Case(name: "array of 100 items", schema: list, answer: listAnswer),
            Case(name: "16 KB answer", schema: report, answer: reportAnswer),
        ]
    }
}
