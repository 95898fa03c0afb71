// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// Every seed (`Fuzz/corpus/<target>`) and every input a fuzzer once broke (`Fuzz/regressions/<target>`) keeps
/// its target's properties. `make fuzz` searches for new ones; this runs the known ones in `make test`.
@Suite struct FuzzRegressionTests {
    static let fuzzDirectory = TestPaths.root + "/Fuzz"

    static func inputs(_ target: String) throws -> [(String, [UInt8])] {
        var out: [(String, [UInt8])] = []
        for kind in ["corpus", "regressions"] {
            let directory = "\(fuzzDirectory)/\(kind)/\(target)"
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { continue }
            for name in names.sorted() where !name.hasPrefix(".") {
                let path = directory + "/" + name
                out.append((path, Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
            }
        }
        return out
    }

    @Test(arguments: FuzzTargets.all.map(\.name))
    func knownInputsKeepTheProperties(_ name: String) throws {
        let target = try #require(FuzzTargets.named(name))
        let inputs = try Self.inputs(name)
        #expect(inputs.count >= 3, "Fuzz/corpus/\(name) needs seeds (a few valid and invalid inputs)")
        for (path, bytes) in inputs {
            #expect(throws: Never.self, "\(path)") { try target.run(bytes) }
        }
    }

    /// AFMJSON and Python's `json` (held to RFC 8259 as AFMJSON is: no NaN, no duplicate keys, no lone
    /// surrogates, no byte order mark, depth ≤ 64) agree on which inputs are JSON.
    @Test func jsonValidityAgreesWithPython() throws {
        let inputs = try Self.inputs("json") + Self.inputs("tool-schema") + Self.inputs("responses-request")
        var verdicts = ""
        for (_, bytes) in inputs {
            let valid = (try? JSONParser.parse(bytes)) != nil
            verdicts += (valid ? "valid\t" : "invalid\t") + bytes.map { String(format: "%02x", $0) }.joined() + "\n"
        }
        let file = TestPaths.makeTemporaryDirectory("afm-json-differential") + "/verdicts"
        try verdicts.write(toFile: file, atomically: true, encoding: .utf8)
        let output = try CommandOutput.run("/usr/bin/env", ["python3", Self.fuzzDirectory + "/json_differential.py", file])
        #expect(output.status == 0, "\(output.output)")
        #expect(output.output.contains("agree on \(inputs.count) inputs"), "\(output.output)")
    }
}
