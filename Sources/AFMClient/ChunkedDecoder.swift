// SPDX-License-Identifier: Apache-2.0
import Foundation

/// Decodes an HTTP/1.1 `Transfer-Encoding: chunked` body incrementally (chunk extensions and trailers ignored).
///
/// Every line is bounded (4 KiB), and so are the trailer fields after the last chunk, in number and in bytes: a
/// server that sends trailers without end would otherwise keep the client reading forever (afmd sends none).
struct ChunkedDecoder: Sendable {
    /// The most trailer lines accepted after the last chunk.
    static let maximumTrailerLines = 64
    /// The most bytes of trailer lines accepted after the last chunk (line ends included).
    static let maximumTrailerBytes = 16 * 1024

    private enum State: Sendable {
        case size
        case data(remaining: Int)
        case dataEnd
        case trailers
        case done
    }

    private var state = State.size
    private var line: [UInt8] = []
    private var trailerLines = 0
    private var trailerBytes = 0

    /// Whether the terminating zero-size chunk (and its trailers) was read.
    var isDone: Bool {
        if case .done = state { return true }
        return false
    }

    /// Feeds raw body bytes; returns the decoded payload bytes.
    mutating func feed(_ bytes: ArraySlice<UInt8>) throws -> [UInt8] {
        var output: [UInt8] = []
        var index = bytes.startIndex
        while index < bytes.endIndex {
            switch state {
            case .size, .dataEnd, .trailers:
                let byte = bytes[index]
                index += 1
                if case .trailers = state {
                    trailerBytes += 1
                    guard trailerBytes <= Self.maximumTrailerBytes else {
                        throw ClientError("malformed chunked response (more than \(Self.maximumTrailerBytes) bytes of trailer fields)")
                    }
                }
                guard byte == 0x0A else {
                    // Every byte counts toward the line's bound, carriage returns too: dropped uncounted, a server
                    // could send them without end and keep the client reading forever.
                    line.append(byte)
                    guard line.count < 4096 else { throw ClientError("malformed chunked response (line too long)") }
                    continue
                }
                if line.last == 0x0D { line.removeLast() }  // CRLF; a carriage return elsewhere is part of the line
                let text = String(decoding: line, as: UTF8.self)
                line.removeAll()
                switch state {
                case .size:
                    let digits = text.prefix { $0 != ";" }.trimmingCharacters(in: .whitespaces)
                    guard let size = Int(digits, radix: 16), size >= 0 else {
                        throw ClientError("malformed chunk size '\(digits)'")
                    }
                    state = size == 0 ? .trailers : .data(remaining: size)
                case .dataEnd:
                    guard text.isEmpty else { throw ClientError("malformed chunked response (no line end after a chunk's data)") }
                    state = .size
                case .trailers:
                    if text.isEmpty {
                        state = .done
                    } else {
                        trailerLines += 1
                        guard trailerLines <= Self.maximumTrailerLines else {
                            throw ClientError("malformed chunked response (more than \(Self.maximumTrailerLines) trailer lines)")
                        }
                    }
                default: break
                }
            case .data(let remaining):
                let take = min(remaining, bytes.endIndex - index)
                output.append(contentsOf: bytes[index..<index + take])
                index += take
                state = remaining - take == 0 ? .dataEnd : .data(remaining: remaining - take)
            case .done:
                return output
            }
        }
        return output
    }
}
