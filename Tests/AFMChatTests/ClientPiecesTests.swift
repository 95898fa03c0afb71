// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMImageCodec
import AFMJSON
import AFMSSE
import AFMSystem
import Foundation
import Testing

@Suite struct ClientPiecesTests {
    @Test func sseParserHandlesSplitsAndCRLF() {
        var parser = SSEParser()
        let stream = "event: response.created\r\ndata: {\"a\":1}\r\n\r\n: comment\n\nevent: x\ndata: one\ndata: two\n\n"
        var messages: [SSEParser.Event] = []
        for byte in Array(stream.utf8) { messages += parser.feed([byte]) }
        #expect(messages == [.init(name: "response.created", data: Array("{\"a\":1}".utf8)), .init(name: "x", data: Array("one\ntwo".utf8))])
    }

    /// A server that never ends a line, or an event, or sends an endless error body, cannot make the client's memory
    /// grow without bound: the stream fails with `stream_too_large` at the cap. Before, the chat client's parser
    /// buffered all of it (the line case kept reading 40 MiB and more without an event).
    @Test(arguments: [
        ("line", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: ", "a", "a line longer than"),
        ("event", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n", "data: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", "an event larger than"),
        ("error body", "HTTP/1.1 500 Internal Server Error\r\n\r\n", "a", "error body larger than"),
    ])
    func aHostileStreamEndsAtTheClientsCaps(_ kind: String, _ head: String, _ unit: String, _ expected: String) throws {
        let url = try serveForever(head: head, unit: unit)
        let stream = try ResponsesClient(url: url).startStream(body: Array(#"{"model":"m","input":"x","stream":true}"#.utf8))
        var last: StreamEvent?
        let deadline = Date().addingTimeInterval(120)
        while !stream.isFinished && Date() < deadline {
            _ = try stream.descriptor.poll(readable: true, writable: false, timeoutMilliseconds: 1000)
            if let event = stream.readEvents().last { last = event }
        }
        guard case .failed(let code, let message)? = last else {
            Issue.record("\(kind): the stream did not fail at a cap (last event: \(String(describing: last)))")
            return
        }
        #expect(code == "stream_too_large", "\(kind): \(message)")
        #expect(message.contains(expected), "\(kind): \(message)")
    }

    /// An event may hold 32 MiB, but not a JSON tree of any number of values: 300,000 empty objects (900 KB) fail the
    /// stream with `stream_too_large` at the shared cap of JSON values (the one afmd's request parser applies), as
    /// 32 MiB of them would have cost about a GiB. Before, the event was parsed whole and the stream completed.
    @Test func anEventOfTooManyJSONValuesFailsTheStream() throws {
        let filler = Array(repeating: "{}", count: 300_000).joined(separator: ",")
        let data = #"{"type":"response.completed","response":{"status":"completed","filler":[\#(filler)]}}"#
        let url = try serveOnce("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nevent: response.completed\ndata: \(data)\n\n")
        let last = try lastEvent(of: ResponsesClient(url: url).startStream(body: Array(#"{"model":"m","input":"x","stream":true}"#.utf8)))
        guard case .failed(let code, let message)? = last else {
            Issue.record("the stream did not fail (last event: \(String(describing: last)))")
            return
        }
        #expect(code == "stream_too_large", "\(message)")
        #expect(message.contains("\(JSONParser.Limits.maximumDocumentValues) JSON values"), "\(message)")
    }

    /// Trailer fields after the last chunk are bounded (count and bytes): a server that sends them forever fails the
    /// stream with a clear error instead of keeping `afm` reading. Before, the client read trailers without end.
    @Test func endlessTrailersFailTheStream() throws {
        let url = try serveForever(
            head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n", unit: "X-Trailer: a\r\n")
        let message = try failureOfAStream(from: url)
        #expect(message?.contains("trailer") == true, "\(String(describing: message))")
    }

    /// Carriage returns without a line feed count toward a line's bound, on a chunk-size line and on the line after a
    /// chunk's data: a server that sends them forever fails the stream. Before, they were dropped uncounted and the
    /// client read without end (review s9 #1).
    @Test func endlessCarriageReturnsInAChunkedLineFailTheStream() throws {
        for prefix in ["", "5\r\nhello"] {
            let url = try serveForever(
                head: "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n\(prefix)", unit: "\r")
            let message = try failureOfAStream(from: url)
            #expect(message?.contains("line too long") == true, "\(String(describing: message))")
        }
    }

    /// Starts a stream from the server at `url` and returns its failure message (an issue is recorded and nil
    /// returned when the stream does not fail).
    private func failureOfAStream(from url: ServerURL) throws -> String? {
        let last = try lastEvent(of: ResponsesClient(url: url).startStream(body: Array(#"{"model":"m","input":"x","stream":true}"#.utf8)))
        guard case .failed(_, let message)? = last else {
            Issue.record("the stream did not fail (last event: \(String(describing: last)))")
            return nil
        }
        return message
    }

    /// Reads `stream` until it finishes (at most 120 s) and returns its last event.
    private func lastEvent(of stream: ResponseStream) throws -> StreamEvent? {
        var last: StreamEvent?
        let deadline = Date().addingTimeInterval(120)
        while !stream.isFinished && Date() < deadline {
            _ = try stream.descriptor.poll(readable: true, writable: false, timeoutMilliseconds: 1000)
            if let event = stream.readEvents().last { last = event }
        }
        return last
    }

    /// Serves one connection on 127.0.0.1:0: `head`, then `unit` over and over until the client closes.
    private func serveForever(head: String, unit: String) throws -> ServerURL {
        try serve { connection in
            var bytes = Array(head.utf8)
            _ = try? bytes.withUnsafeBytes { try connection.write($0) }
            bytes = Array(String(repeating: unit, count: 65_536 / unit.utf8.count).utf8)
            // At most 2 GiB: far past every cap, and an end even if the client never stops reading.
            for _ in 0..<32_768 {
                guard Self.writeAll(bytes, to: connection) else { return }
            }
        }
    }

    /// Writes all of `bytes` to the non-blocking `connection`; false when the client closed or stopped reading.
    private static func writeAll(_ bytes: [UInt8], to connection: FileDescriptor) -> Bool {
        var offset = 0
        while offset < bytes.count {
            switch try? bytes[offset...].withUnsafeBytes({ try connection.write($0) }) {
            case .processed(let count)?: offset += count
            case .wouldBlock?:
                // A client that stopped reading for 10 s is not coming back.
                guard (try? connection.poll(readable: false, writable: true, timeoutMilliseconds: 10_000))?.writable == true else { return false }
            case nil: return false  // The client closed.
            }
        }
        return true
    }

    /// Serves one connection on 127.0.0.1:0 with `response` (after reading the request head); returns the URL.
    private func serveOnce(_ response: String) throws -> ServerURL {
        try serve { connection in
            guard Self.writeAll(Array(response.utf8), to: connection) else { return }
            _ = try? connection.poll(readable: true, writable: false, timeoutMilliseconds: 2_000)  // until the client closes
        }
    }

    /// Accepts one connection on 127.0.0.1:0 on a thread of its own, reads the request head, and lets `answer`
    /// write the response; returns the URL.
    private func serve(_ answer: @escaping @Sendable (FileDescriptor) -> Void) throws -> ServerURL {
        let listener = try FileDescriptor.makeTCPListener(address: try #require(SocketAddress(host: "127.0.0.1", port: 0)))
        let port = try listener.localAddress().port
        Thread.detachNewThread {
            defer { listener.close() }
            guard (try? listener.poll(readable: true, writable: false, timeoutMilliseconds: 10_000)) != nil,
                case .processed(let accepted)? = try? listener.accept()
            else { return }
            let connection = accepted.descriptor
            defer { connection.close() }
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = try? connection.poll(readable: true, writable: false, timeoutMilliseconds: 10_000)
            _ = try? buffer.withUnsafeMutableBytes { try connection.read(into: $0) }
            answer(connection)
        }
        return try #require(ServerURL(string: "http://127.0.0.1:\(port)"))
    }

    @Test func markdownIsPlainWhenPipedAndStyledOnTerminals() {
        var plain = MarkdownRenderer(colors: false)
        #expect(plain.feed("# Title\n**bold** `x`") + plain.finish() == "# Title\n**bold** `x`")
        var styled = MarkdownRenderer(colors: true)
        var output = ""
        for character in "# Title\nsome **bold** and `code`\n```swift\nlet x = 1\n```\n- item\n" { output += styled.feed(String(character)) }
        output += styled.finish()
        #expect(output.contains("\u{1B}[1mTitle"))
        #expect(output.contains("\u{1B}[1mbold\u{1B}[22m"))
        #expect(output.contains("\u{1B}[36mcode\u{1B}[39m"))
        #expect(output.contains("let x = 1"))
        #expect(output.contains("• item"))
        #expect(!output.contains("**") && !output.contains("`code`"))
    }

    @Test(arguments: ["-5", "12abc", "-9223372036854775808"])
    func anInvalidContentLengthIsAnErrorNotACrash(_ length: String) throws {
        let url = try serveOnce("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n{\"data\":[]}")
        let error = try #require(throws: ClientError.self) { try ResponsesClient(url: url).listModels(timeoutMilliseconds: 5_000) }
        #expect(error.message.contains("Content-Length"))
    }

    /// The model list is parsed with the shared cap on JSON values too: 300,000 empty entries are an error naming the
    /// cap. Before, they were parsed whole (16 MiB of them would be about 500 MB of tree) and the list came back empty.
    @Test func aModelListOfTooManyJSONValuesIsAnError() throws {
        let body = #"{"object":"list","data":["# + Array(repeating: "{}", count: 300_000).joined(separator: ",") + "]}"
        let url = try serveOnce("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
        let error = try #require(throws: ClientError.self) { try ResponsesClient(url: url).listModels(timeoutMilliseconds: 20_000) }
        #expect(error.message.contains("\(JSONParser.Limits.maximumDocumentValues) JSON values"), "\(error.message)")
    }

    @Test func serverURLs() {
        #expect(ServerURL(string: "http://127.0.0.1:11535") == ServerURL.default)
        #expect(ServerURL(string: "http://localhost:8080/gw/")?.pathPrefix == "/gw")
        #expect(ServerURL(string: "http://[::1]:9")?.host == "::1")
        #expect(ServerURL(string: "https://x") == nil)
        #expect(ServerURL(string: "http://h:0") == nil)
    }

    @Test func imagesAreNormalizedToTheLimits() throws {
        let normalizer = ImageNormalizer()
        let small = try TestImages.png(width: 40, height: 30)
        let kept = try normalizer.normalize(small)
        #expect(kept.isOriginal && kept.bytes == small && kept.width == 40)
        let large = try TestImages.png(width: 2400, height: 1200, noise: true)
        let scaled = try normalizer.normalize(large)
        #expect(!scaled.isOriginal && max(scaled.width, scaled.height) <= 1536 && scaled.bytes.count <= 2 * 1024 * 1024)
        #expect(scaled.width == 1536 || scaled.width < 1536 && scaled.mimeType == "image/jpeg")
        #expect(throws: ImageCodecError.self) { try normalizer.normalize(Array("not an image".utf8)) }
        #expect(throws: ImageCodecError.self) { try normalizer.normalize(Array(small.prefix(40))) }
    }
}
