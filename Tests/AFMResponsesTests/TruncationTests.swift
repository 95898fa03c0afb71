// SPDX-License-Identifier: Apache-2.0
import Testing

@testable import AFMResponses

/// `truncation: "auto"`'s prediction of the cut multiplies estimates by the backend tokenizer's count: a count near
/// `Int.max` (a hostile or broken backend) must give an answer, not trap afmd.
@Suite struct TruncationTests {
    @Test func aHugeTokenizerCountPredictsNoCutInsteadOfTrapping() {
        let estimates = [0, 900, 600, 300]
        #expect(Truncation.predictedCut(estimates: { estimates[$0] }, last: 3, counted: .max, estimate: 1000, limit: 500) == 3)
        #expect(Truncation.predictedCut(estimates: { estimates[$0] }, last: 3, counted: Int(UInt32.max), estimate: 1000, limit: 500) == 3)
    }

    @Test func theCutFollowsTheTokenizersRatio() {
        let estimates = [0, 900, 600, 300]
        // The tokenizer counts half the estimate: 600 * 0.5 = 300 fits 400, 900 * 0.5 = 450 does not.
        #expect(Truncation.predictedCut(estimates: { estimates[$0] }, last: 3, counted: 600, estimate: 1200, limit: 400) == 2)
        #expect(Truncation.predictedCut(estimates: { estimates[$0] }, last: 3, counted: 1200, estimate: 1200, limit: 1000) == 1)
    }
}
