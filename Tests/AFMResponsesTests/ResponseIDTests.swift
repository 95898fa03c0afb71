// SPDX-License-Identifier: Apache-2.0
import AFMResponses
import Testing

/// Response ids: the OpenAI shape, and unique.
@Suite struct ResponseIDTests {
    @Test func idsHaveThePrefixAnd24HexDigitsAndNeverRepeat() {
        var seen = Set<String>()
        for _ in 0..<100_000 {
            let id = ResponseID.make("resp")
            #expect(id.hasPrefix("resp_"))
            let digits = id.dropFirst(5)
            #expect(digits.count == 24)
            #expect(digits.allSatisfy { $0.isHexDigit && !$0.isUppercase })
            seen.insert(id)
        }
        #expect(seen.count == 100_000)
    }
}
