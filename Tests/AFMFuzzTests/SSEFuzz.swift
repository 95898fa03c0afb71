// SPDX-License-Identifier: Apache-2.0
import AFMClient

/// The two server-sent-events parsers: the chat client's (afmd's streams) and the private cloud's (an upstream's).
///
/// Property: the same events however the bytes arrive; the private cloud's caps hold.
enum SSEFuzz {
    static func client(_ bytes: [UInt8]) throws {
        var whole = AFMClient.SSEParser()
        let wholeEvents = whole.feed(bytes)
        var split = AFMClient.SSEParser()
        var splitEvents: [AFMClient.SSEParser.Message] = []
        for piece in SplitPlan(bytes) { splitEvents += split.feed(piece) }
        try check(wholeEvents == splitEvents, "split input parsed differently: \(wholeEvents) vs \(splitEvents)")
    }

    static func privateCloud(_ bytes: [UInt8]) throws {
        let total = 8192
        let event = 512
        var whole = SSEParser(maximumTotalBytes: total, maximumEventBytes: event)
        let wholeEvents = bytes.withUnsafeBytes { whole.feed($0) }
        var split = SSEParser(maximumTotalBytes: total, maximumEventBytes: event)
        var splitEvents: [SSEParser.Event] = []
        for piece in SplitPlan(bytes) { splitEvents += Array(piece).withUnsafeBytes { split.feed($0) } }
        for parsed in wholeEvents + splitEvents {
            try check(parsed.data.count <= event, "an event of \(parsed.data.count) bytes passed the \(event)-byte cap")
        }
        // The total cap is checked per piece (a piece over it is refused whole), so only streams within every cap
        // must agree exactly.
        if whole.overflow == nil {
            try check(split.overflow == nil, "split input overflowed (\(split.overflow!)) where the whole did not")
            try check(wholeEvents == splitEvents, "split input parsed differently: \(wholeEvents.count) vs \(splitEvents.count) events")
        }
    }
}
