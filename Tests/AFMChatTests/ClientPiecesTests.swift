// SPDX-License-Identifier: Apache-2.0
import AFMChat
import AFMClient
import AFMImageCodec
import AFMSystem
import Foundation
import Testing

@Suite struct ClientPiecesTests {
    @Test func sseParserHandlesSplitsAndCRLF() {
        var parser = SSEParser()
        let stream = "event: response.created\r\ndata: {\"a\":1}\r\n\r\n: comment\n\nevent: x\ndata: one\ndata: two\n\n"
        var messages: [SSEParser.Message] = []
        for byte in Array(stream.utf8) { messages += parser.feed([byte]) }
        #expect(messages == [.init(event: "response.created", data: "{\"a\":1}"), .init(event: "x", data: "one\ntwo")])
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

    /// Serves one connection on 127.0.0.1:0 with `response` (after reading the request head); returns the URL.
    private func serveOnce(_ response: String) throws -> ServerURL {
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
            let bytes = Array(response.utf8)
            _ = try? bytes.withUnsafeBytes { try connection.write($0) }
            _ = try? connection.poll(readable: true, writable: false, timeoutMilliseconds: 2_000)  // until the client closes
        }
        return try #require(ServerURL(string: "http://127.0.0.1:\(port)"))
    }

    @Test(arguments: ["-5", "12abc", "-9223372036854775808"])
    func anInvalidContentLengthIsAnErrorNotACrash(_ length: String) throws {
        let url = try serveOnce("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(length)\r\n\r\n{\"data\":[]}")
        let error = try #require(throws: ClientError.self) { try ResponsesClient(url: url).listModels(timeoutMilliseconds: 5_000) }
        #expect(error.message.contains("Content-Length"))
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
