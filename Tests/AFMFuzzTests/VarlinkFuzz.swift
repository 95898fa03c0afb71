// SPDX-License-Identifier: Apache-2.0
import AFMAdmin
import AFMJSON

/// The varlink framer of the admin socket.
///
/// Properties: the same messages however the bytes arrive; a message that is JSON, encoded again and framed,
/// comes out as the same value.
enum VarlinkFuzz {
    static let limit = 4096

    static func run(_ bytes: [UInt8]) throws {
        let whole = frames([bytes[...]])
        let pieces = frames(Array(SplitPlan(bytes)))
        try check(whole == pieces, "split input framed differently: \(whole.count) vs \(pieces.count) frames")
        for case .message(let message) in whole {
            try check(message.count <= limit, "a message of \(message.count) bytes passed the \(limit)-byte limit")
            try check(!message.contains(0), "a message contains its terminator")
            guard let value = try? JSONParser.parse(message) else { continue }
            let again = frames([VarlinkFramer.encode(value)[...]])
            guard again.count == 1, case .message(let reencoded) = again[0] else {
                throw PropertyViolation(description: "an encoded message framed as \(again)")
            }
            try check((try? JSONParser.parse(reencoded)) == value, "an encoded message parsed to another value")
        }
    }

    static func frames(_ pieces: [ArraySlice<UInt8>]) -> [VarlinkFramer.Frame] {
        var framer = VarlinkFramer(limit: limit)
        var out: [VarlinkFramer.Frame] = []
        for piece in pieces {
            framer.append(piece)
            while let frame = framer.next() {
                out.append(frame)
                if frame == .tooLarge { return out }
            }
        }
        return out
    }
}
