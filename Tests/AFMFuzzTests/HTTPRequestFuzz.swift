// SPDX-License-Identifier: Apache-2.0
@testable import AFMHTTP

/// The HTTP/1.1 request parser.
///
/// Properties: the same events whether the bytes arrive at once or in pieces (a proxy splits requests anywhere),
/// and every parsed request, written out again in canonical form, parses to the same request.
enum HTTPRequestFuzz {
    /// Small limits, so the fuzzer reaches them.
    static let limits = HTTPRequestParser.Limits(maxHeaderBytes: 2048, maxBodyBytes: 4096, maxHeaderFields: 16)

    static func run(_ bytes: [UInt8]) throws {
        let whole = events(feeding: [bytes[...]], limits: limits)
        let pieces = events(feeding: Array(SplitPlan(bytes)), limits: limits)
        try check(whole == pieces, "split input parsed differently:\n  whole:  \(whole)\n  pieces: \(pieces)")
        for case .request(let request) in whole {
            let again = events(feeding: [canonical(request)[...]], limits: roomy)
            try check(
                again == [.request(request)],
                "a parsed request written out again parsed differently:\n  first: \(request)\n  again: \(again)")
        }
    }

    /// What the parser reported, in a comparable form (100-continue depends on where a piece ends, so it is left
    /// out).
    enum Outcome: Equatable, CustomStringConvertible {
        case request(Request)
        case error(status: Int, code: String)

        var description: String {
            switch self {
            case .request(let request): "\(request)"
            case .error(let status, let code): "error \(status) \(code)"
            }
        }
    }

    struct Request: Equatable {
        var method: String
        var target: String
        var path: String
        var query: String?
        var minorVersion: Int
        var headers: [String]
        var keepAlive: Bool
        var body: [UInt8]

        init(_ parsed: HTTPParsedRequest) {
            method = parsed.head.method
            target = parsed.head.target
            path = parsed.head.path
            query = parsed.head.query
            minorVersion = parsed.head.version.minor
            // The framing fields are reflected by the body (chunked arrives decoded), so they are left out.
            headers = parsed.head.headers.compactMap { name, value in
                let lower = name.lowercased()
                return lower == "content-length" || lower == "transfer-encoding" ? nil : "\(name): \(value)"
            }
            keepAlive = parsed.head.keepAlive
            body = parsed.body
        }
    }

    private static let roomy = HTTPRequestParser.Limits(maxHeaderBytes: 1 << 20, maxBodyBytes: 1 << 20, maxHeaderFields: 1000)

    static func events(feeding pieces: [ArraySlice<UInt8>], limits: HTTPRequestParser.Limits) -> [Outcome] {
        var parser = HTTPRequestParser(limits: limits)
        var out: [Outcome] = []
        for piece in pieces {
            parser.feed(Array(piece))
            while true {
                switch parser.next() {
                case .needMoreData: break
                case .expectContinue: continue
                case .request(let request):
                    out.append(.request(Request(request)))
                    continue
                case .error(let error):
                    out.append(.error(status: error.status, code: error.code))
                    return out
                }
                break
            }
        }
        return out
    }

    /// The request in canonical form: CRLF line ends, one space after each colon, and the body framed by
    /// `Content-Length` (the original framing fields are dropped: chunked bodies arrive decoded).
    static func canonical(_ request: Request) -> [UInt8] {
        var out = Array("\(request.method) \(request.target) HTTP/1.\(request.minorVersion)\r\n".utf8)
        for field in request.headers { out += Array(field.utf8) + [13, 10] }
        if !request.body.isEmpty { out += Array("Content-Length: \(request.body.count)\r\n".utf8) }
        out += [13, 10] + request.body
        return out
    }
}
