// SPDX-License-Identifier: Apache-2.0
import AFMHTTP
import AFMSystem

/// Errors from ``TestClient``.
struct TestClientError: Error, CustomStringConvertible {
    var description: String
}

/// A response as the test client parsed it.
struct TestResponse {
    var status: Int
    var headers: HTTPHeaders
    var body: [UInt8]
    /// Whether the body was chunked (Transfer-Encoding: chunked).
    var chunked: Bool

    var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A minimal HTTP/1.1 client over a real loopback socket, for live server tests.
///
/// The socket is non-blocking and waits are `Task.sleep` polls, so tests never block the cooperative thread
/// pool (on a 2-core machine two blocked test tasks would starve the server's handler tasks). Used by one
/// task at a time, hence not `Sendable`.
final class TestClient {
    let descriptor: FileDescriptor
    private var buffer: [UInt8] = []
    private var closed = false
    private(set) var sawEOF = false

    init(port: Int, host: String = "127.0.0.1") throws {
        guard let address = SocketAddress(host: host, port: port) else {
            throw TestClientError(description: "bad address \(host):\(port)")
        }
        descriptor = try FileDescriptor.connectTCP(to: address, nonBlocking: true)
    }

    deinit { close() }

    func close() {
        guard !closed else { return }
        closed = true
        descriptor.close()
    }

    /// Closes with a TCP reset instead of a FIN.
    func reset() {
        try? descriptor.setResetOnClose()
        close()
    }

    func shutdownWrite() { descriptor.shutdown(.write) }

    func send(_ text: String, timeout: Duration = .seconds(10)) async throws {
        try await send(Array(text.utf8), timeout: timeout)
    }

    func send(_ bytes: [UInt8], timeout: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + timeout
        var offset = 0
        while offset < bytes.count {
            let result = try bytes.withUnsafeBytes { raw in
                try descriptor.write(UnsafeRawBufferPointer(rebasing: raw[offset...]))
            }
            switch result {
            case .processed(let count):
                offset += count
            case .wouldBlock:
                guard ContinuousClock.now < deadline else { throw TestClientError(description: "send timed out") }
                try await Task.sleep(for: .milliseconds(1))
            }
        }
    }

    /// Reads whatever is available into the buffer; returns false when nothing was available.
    private func fill() throws -> Bool {
        if sawEOF { return false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let result = try chunk.withUnsafeMutableBytes { try descriptor.read(into: $0) }
        switch result {
        case .wouldBlock:
            return false
        case .processed(0):
            sawEOF = true
            return false
        case .processed(let count):
            buffer.append(contentsOf: chunk[0..<count])
            return true
        }
    }

    /// Waits until `condition` on the buffer holds, reading as data arrives.
    private func waitFor(timeout: Duration, _ what: String, _ condition: ([UInt8]) -> Bool) async throws {
        let deadline = ContinuousClock.now + timeout
        while !condition(buffer) {
            do {
                if try fill() { continue }
            } catch let error as SystemCallError where error.errno == .connectionReset {
                sawEOF = true
            }
            if sawEOF { throw TestClientError(description: "connection closed while waiting for \(what)") }
            guard ContinuousClock.now < deadline else {
                throw TestClientError(description: "timed out waiting for \(what); have \(buffer.count) bytes")
            }
            try await Task.sleep(for: .milliseconds(1))
        }
    }

    /// Takes exactly `count` bytes.
    func readBytes(_ count: Int, timeout: Duration = .seconds(10)) async throws -> [UInt8] {
        try await waitFor(timeout: timeout, "\(count) bytes") { $0.count >= count }
        let out = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return out
    }

    /// Takes bytes up to and including `delimiter`.
    func readUntil(_ delimiter: [UInt8], timeout: Duration = .seconds(10)) async throws -> [UInt8] {
        var found = 0
        try await waitFor(timeout: timeout, "delimiter") { buffer in
            guard let index = Self.find(delimiter, in: buffer) else { return false }
            found = index + delimiter.count
            return true
        }
        let out = Array(buffer[0..<found])
        buffer.removeFirst(found)
        return out
    }

    /// Waits for the server to close; returns the bytes received before the end.
    func readToEnd(timeout: Duration = .seconds(10)) async throws -> [UInt8] {
        let deadline = ContinuousClock.now + timeout
        while true {
            do {
                if try fill() { continue }
            } catch let error as SystemCallError where error.errno == .connectionReset {
                sawEOF = true
            }
            if sawEOF { break }
            guard ContinuousClock.now < deadline else { throw TestClientError(description: "no EOF in time") }
            try await Task.sleep(for: .milliseconds(1))
        }
        let out = buffer
        buffer = []
        return out
    }

    /// Whether the server closed the connection within `timeout` (with nothing more sent before).
    func waitForEOF(timeout: Duration = .seconds(10)) async throws -> Bool {
        let rest = try await readToEnd(timeout: timeout)
        return rest.isEmpty
    }

    /// Whether anything arrived (or the connection ended) within `duration`.
    func receivesNothing(for duration: Duration) async throws -> Bool {
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline {
            if try fill() || sawEOF { return false }
            try await Task.sleep(for: .milliseconds(5))
        }
        return buffer.isEmpty
    }

    /// Reads one response. Interim 1xx responses are returned like final ones (check `status`).
    func readResponse(headRequest: Bool = false, timeout: Duration = .seconds(10)) async throws -> TestResponse {
        let headBytes = try await readUntil(Array("\r\n\r\n".utf8), timeout: timeout)
        let text = String(decoding: headBytes, as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: true)
        guard !lines.isEmpty else { throw TestClientError(description: "empty response head") }
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1", let status = Int(parts[1]) else {
            throw TestClientError(description: "bad status line \(statusLine)")
        }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw TestClientError(description: "bad field \(line)") }
            headers.add(
                name: String(line[..<colon]),
                value: String(line[line.index(after: colon)...].drop(while: { $0 == " " })))
        }
        if status < 200 || headRequest || status == 204 || status == 304 {
            return TestResponse(status: status, headers: headers, body: [], chunked: false)
        }
        if headers["Transfer-Encoding"]?.lowercased() == "chunked" {
            var body: [UInt8] = []
            while true {
                let sizeLine = try await readUntil(Array("\r\n".utf8), timeout: timeout)
                let sizeText = String(decoding: sizeLine.dropLast(2), as: UTF8.self)
                guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else {
                    throw TestClientError(description: "bad chunk size \(sizeText)")
                }
                if size == 0 {
                    _ = try await readUntil(Array("\r\n".utf8), timeout: timeout)
                    break
                }
                body += try await readBytes(size, timeout: timeout)
                let crlf = try await readBytes(2, timeout: timeout)
                guard crlf == Array("\r\n".utf8) else { throw TestClientError(description: "chunk without CRLF") }
            }
            return TestResponse(status: status, headers: headers, body: body, chunked: true)
        }
        if let length = headers["Content-Length"].flatMap({ Int($0) }) {
            return TestResponse(
                status: status, headers: headers, body: try await readBytes(length, timeout: timeout), chunked: false)
        }
        return TestResponse(
            status: status, headers: headers, body: try await readToEnd(timeout: timeout), chunked: false)
    }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for index in 0...(haystack.count - needle.count) where haystack[index] == needle[0] {
            if Array(haystack[index..<(index + needle.count)]) == needle { return index }
        }
        return nil
    }
}
