// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A deliberately simple blocking HTTP/1.1 client over a real loopback socket, for tests.
///
/// It writes exactly the bytes a test gives it (so malformed requests can be sent) and parses responses with
/// `Content-Length`, chunked or close-delimited bodies. Every read has a timeout so a broken server fails the
/// test instead of hanging it.
public final class TestHTTPClient {
    public struct Response: CustomStringConvertible {
        public var status: Int
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        public var text: String { String(decoding: body, as: UTF8.self) }

        public var json: JSONValue? { try? JSONParser.parse(body) }

        /// The events of an SSE body: (event name, parsed data).
        public var events: [(event: String, data: JSONValue)] {
            TestHTTPClient.parseEvents(text)
        }

        public var description: String { "HTTP \(status) \(text.prefix(400))" }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public let fd: Int32
    private var buffer: [UInt8] = []

    /// Connects to 127.0.0.1:`port`.
    public init(port: Int, timeoutSeconds: Int = 30) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Failure(description: "connect to port \(port): errno \(code)")
        }
    }

    /// Connects to the Unix stream socket at `unixPath`.
    public init(unixPath: String, timeoutSeconds: Int = 30) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(unixPath.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw Failure(description: "path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (index, byte) in bytes.enumerated() { raw[index] = byte }
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard result == 0 else {
            let code = errno
            Glibc.close(fd)
            throw Failure(description: "connect to \(unixPath): errno \(code)")
        }
    }

    deinit { Glibc.close(fd) }

    /// Closes the connection now (the server sees EOF).
    public func close() { shutdown(fd, Int32(SHUT_RDWR)) }

    /// Sends raw bytes.
    public func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else { throw Failure(description: "send: errno \(errno)") }
            offset += written
        }
    }

    public func send(_ text: String) throws { try send(Array(text.utf8)) }

    /// Sends one request; adds Host and Content-Length, and `Content-Type: application/json` to a POST without one
    /// (afmd answers 415 to a POST of another type: docs/responses-api.md).
    public func sendRequest(_ method: String, _ path: String, body: [UInt8]? = nil, headers: [String: String] = [:]) throws {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        var headers = headers
        if method == "POST", body != nil, !headers.keys.contains(where: { $0.lowercased() == "content-type" }) {
            headers["Content-Type"] = "application/json"
        }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try send(Array(head.utf8) + (body ?? []))
    }

    /// Sends a JSON POST and reads the whole response.
    public func post(_ path: String, json: String, headers: [String: String] = [:]) throws -> Response {
        try sendRequest("POST", path, body: Array(json.utf8), headers: ["Content-Type": "application/json"].merging(headers) { $1 })
        return try readResponse()
    }

    public func get(_ path: String, headers: [String: String] = [:]) throws -> Response {
        try sendRequest("GET", path, headers: headers)
        return try readResponse()
    }

    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        if count == 0 { return false }
        guard count > 0 else { throw Failure(description: "recv: errno \(errno) (timeout or reset)") }
        buffer += chunk[0..<count]
        return true
    }

    private func readLine() throws -> String {
        while true {
            if let index = buffer.firstIndex(of: 10) {
                var line = Array(buffer[..<index])
                buffer.removeFirst(index + 1)
                if line.last == 13 { line.removeLast() }
                return String(decoding: line, as: UTF8.self)
            }
            guard try fill() else { throw Failure(description: "connection closed while reading a line") }
        }
    }

    private func readExactly(_ count: Int) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill() else { throw Failure(description: "connection closed with \(count - buffer.count) body bytes missing") }
        }
        let bytes = Array(buffer[..<count])
        buffer.removeFirst(count)
        return bytes
    }

    /// Reads bytes until EOF (for close-delimited bodies and to observe the server closing).
    public func readToEnd() throws -> [UInt8] {
        while try fill() {}
        defer { buffer = [] }
        return buffer
    }

    /// Whether the server closed the connection (reads EOF within the timeout).
    public func serverClosed() -> Bool {
        (try? fill()) == false
    }

    /// Reads one response (skipping 1xx interim responses).
    public func readResponse() throws -> Response {
        while true {
            let statusLine = try readLine()
            let parts = statusLine.split(separator: " ", maxSplits: 2)
            guard parts.count >= 2, let status = Int(parts[1]) else { throw Failure(description: "bad status line '\(statusLine)'") }
            var headers: [(String, String)] = []
            while true {
                let line = try readLine()
                if line.isEmpty { break }
                guard let colon = line.firstIndex(of: ":") else { throw Failure(description: "bad header '\(line)'") }
                headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
            }
            if (100..<200).contains(status) { continue }
            var response = Response(status: status, headers: headers, body: [])
            if response.header("Transfer-Encoding")?.lowercased().contains("chunked") == true {
                while true {
                    let sizeLine = try readLine()
                    guard let size = Int(sizeLine.split(separator: ";")[0], radix: 16) else { throw Failure(description: "bad chunk size '\(sizeLine)'") }
                    if size == 0 {
                        while try !readLine().isEmpty {}
                        break
                    }
                    response.body += try readExactly(size)
                    _ = try readLine()
                }
            } else if let length = response.header("Content-Length").flatMap(Int.init) {
                response.body = try readExactly(length)
            } else if status != 204 && status != 304 {
                response.body = try readToEnd()
            }
            return response
        }
    }

    /// Reads the head of a streamed response, then hands each received chunk of body text to `onData` until it
    /// returns false (so a test can react mid-stream, e.g. disconnect).
    public func readStreamHead() throws -> Int {
        let statusLine = try readLine()
        while try !readLine().isEmpty {}
        return Int(statusLine.split(separator: " ")[1]) ?? 0
    }

    /// Reads raw bytes of a chunked stream until `predicate` is true on everything read so far.
    public func readUntil(_ predicate: (String) -> Bool) throws -> String {
        var seen = String(decoding: buffer, as: UTF8.self)
        while !predicate(seen) {
            guard try fill() else { throw Failure(description: "connection closed before the expected data") }
            seen = String(decoding: buffer, as: UTF8.self)
        }
        return seen
    }

    /// Parses SSE text into (event, data) pairs; chunk-size lines of a raw chunked stream are ignored.
    public static func parseEvents(_ text: String) -> [(event: String, data: JSONValue)] {
        var result: [(String, JSONValue)] = []
        var name = ""
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let line = line.hasSuffix("\r") ? line.dropLast() : line
            if line.hasPrefix("event: ") {
                name = String(line.dropFirst(7))
            } else if line.hasPrefix("data: "), let data = try? JSONParser.parse(String(line.dropFirst(6))) {
                result.append((name, data))
            }
        }
        return result
    }
}
