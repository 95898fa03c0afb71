// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import Testing

@Suite struct ChunkedBodyTests {
    @Test func decodesChunkedBodySentInPieces() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send("POST /c HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            for piece in [
                "4;ext=1\r\n", "wiki\r\n", "5\r\npe", "dia\r\n", "E\r\n in\r\n\r\nchunks.\r\n", "0\r\n", "\r\n",
            ] {
                try await client.send(piece)
                try await Task.sleep(for: .milliseconds(2))
            }
            let response = try await client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText == "wikipedia in\r\n\r\nchunks.")
        }
    }

    @Test func toleratesTrailerFields() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                "POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Checksum: 1\r\n\r\n"
                    + "GET /after HTTP/1.1\r\nHost: t\r\n\r\n")
            #expect(try await client.readResponse().bodyText == "abc")
            #expect(try await client.readResponse().headers["X-Path"] == "/after")
        }
    }

    @Test func readsLargeChunkedBody() async throws {
        let payload = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send("POST / HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
            var offset = 0
            while offset < payload.count {
                let size = min(7_001, payload.count - offset)
                try await client.send(Array(String(size, radix: 16).utf8) + Array("\r\n".utf8))
                try await client.send(Array(payload[offset..<(offset + size)]) + Array("\r\n".utf8))
                offset += size
            }
            try await client.send("0\r\n\r\n")
            let response = try await client.readResponse()
            #expect(response.body == payload)
        }
    }

    @Test func sendsContinueBeforeReadingBody() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send("POST /up HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            let interim = try await client.readResponse()
            #expect(interim.status == 100)
            try await client.send("data")
            let final = try await client.readResponse()
            #expect(final.status == 200)
            #expect(final.bodyText == "data")
        }
    }

    @Test func sendsContinueForChunkedBody() async throws {
        try await withTestServer { _, port in
            let client = try TestClient(port: port)
            try await client.send(
                "POST /up HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n")
            #expect(try await client.readResponse().status == 100)
            try await client.send("2\r\nok\r\n0\r\n\r\n")
            #expect(try await client.readResponse().bodyText == "ok")
        }
    }
}
