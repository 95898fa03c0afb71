// SPDX-License-Identifier: Apache-2.0
import AFMBackends
import Testing

/// A describe document's numbers come from a backend (possibly a runner process): the parser refuses numbers it
/// cannot do budget arithmetic on, naming the field, and never traps on them.
@Suite struct BackendDescriptionTests {
    static func document(_ model: String) -> [UInt8] {
        Array(#"{"describe_version":1,"backend":"b","version":"1","models":[{"id":"m"\#(model)}]}"#.utf8)
    }

    static func parse(_ model: String) throws(DescribeError) -> BackendDescription.Model? {
        try BackendDescription(document: document(model), backendABIMinor: 1).models.first
    }

    /// (model members, the field the refusal must name)
    static let refused: [(String, String)] = [
        (#","context_tokens":9223372036854775807"#, "context_tokens"),
        (#","context_tokens":3074457345618258603"#, "context_tokens"),
        (#","context_tokens":2147483648"#, "context_tokens"),
        (#","context_tokens":0"#, "context_tokens"),
        (#","context_tokens":-5"#, "context_tokens"),
        (#","context_tokens":4096,"max_input_tokens":-9223372036854775807"#, "max_input_tokens"),
        (#","context_tokens":4096,"max_input_tokens":-9223372036854775808"#, "max_input_tokens"),
        (#","context_tokens":4096,"max_input_tokens":0"#, "max_input_tokens"),
        (#","context_tokens":4096,"max_input_tokens":4097"#, "max_input_tokens"),
        (#","context_tokens":4096,"max_output_tokens":9223372036854775807"#, "max_output_tokens"),
        (#","context_tokens":4096,"max_output_tokens":-1"#, "max_output_tokens"),
        (#","context_tokens":4096,"max_input_tokens":4096"#, "max_output_tokens"),
    ]

    @Test(arguments: refused)
    func hostileNumbersAreRefusedNamingTheField(_ members: String, _ field: String) {
        do {
            let model = try Self.parse(members)
            Issue.record("accepted \(members): \(String(describing: model))")
        } catch {
            #expect(error.message.contains("models[0].\(field)"), "\(error.message)")
        }
    }

    @Test func budgetsDefaultToThreeQuartersAndTheRest() throws {
        let model = try #require(try Self.parse(#","context_tokens":4097"#))
        #expect(model.contextTokens == 4097)
        #expect(model.maxInputTokens == 3072)
        #expect(model.maxOutputTokens == 1025)
        let largest = try #require(try Self.parse(#","context_tokens":2147483647"#))
        #expect(largest.maxInputTokens == 1_610_612_735)
        #expect(largest.maxOutputTokens == 536_870_912)
        let stated = try #require(try Self.parse(#","context_tokens":100,"max_input_tokens":100,"max_output_tokens":100"#))
        #expect(stated.maxInputTokens == 100)
        #expect(stated.maxOutputTokens == 100)
        let one = try #require(try Self.parse(#","context_tokens":1,"max_input_tokens":1,"max_output_tokens":1"#))
        #expect(one.maxOutputTokens == 1)
    }
}
