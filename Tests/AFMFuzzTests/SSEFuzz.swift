// SPDX-License-Identifier: Apache-2.0
import AFMClient
import AFMSSE

/// The one server-sent-events parser (AFMSSE), as the chat client reads afmd's streams and as the private cloud reads
/// an upstream's (with caps small enough for the fuzzer to reach).
///
/// Property: the same events however the bytes arrive; the caps hold.
enum SSEFuzz {
    static func client(_ bytes: [UInt8]) throws {
        try splitAgrees(bytes, total: ResponseStream.maximumStreamBytes, event: ResponseStream.maximumEventBytes)
    }

    static func privateCloud(_ bytes: [UInt8]) throws {
        try splitAgrees(bytes, total: 8192, event: 512)
    }

    private static func splitAgrees(_ bytes: [UInt8], total: Int, event: Int) throws {
        var whole = SSEParser(maximumTotalBytes: total, maximumEventBytes: event)
        let wholeEvents = whole.feed(bytes)
        var split = SSEParser(maximumTotalBytes: total, maximumEventBytes: event)
        var splitEvents: [SSEParser.Event] = []
        for piece in SplitPlan(bytes) { splitEvents += split.feed(Array(piece)) }
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
