// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import Foundation

/// One HTTP/1.1 request and its response over its own TCP connection (`Connection: close`).
///
/// A deliberately small client: afmd speaks plain HTTP/1.1 on loopback, and the chat client needs exactly one
/// streaming POST at a time that it can abandon instantly (Ctrl-C) and poll together with the terminal. The
/// socket is non-blocking after connecting; ``readAvailable()`` consumes what has arrived and never waits, so
/// the caller's `poll(2)` loop over the terminal and ``descriptor`` decides when to read.
final class HTTPExchange {
    /// The socket; poll it for readability.
    let descriptor: FileDescriptor
    private var head: [UInt8] = []
    private var headDone = false
    private(set) var status = 0
    private var chunked = false
    private var contentLength: Int?
    private var bodyReceived = 0
    private var decoder = ChunkedDecoder()
    private(set) var isClosed = false
    /// Whether the body ended (by length, last chunk or EOF).
    private(set) var isComplete = false

    /// Connects and sends the request.
    init(url: ServerURL, method: String, path: String, body: [UInt8]?, accept: String) throws {
        guard let address = url.socketAddress else {
            throw ClientError("cannot connect to \(url): only numeric addresses and localhost are supported")
        }
        do {
            descriptor = try FileDescriptor.connectTCP(to: address)
        } catch {
            throw ClientError("cannot connect to \(url): \(error.errno)")
        }
        var request = "\(method) \(url.pathPrefix)\(path) HTTP/1.1\r\nHost: \(url.hostHeader)\r\nAccept: \(accept)\r\n"
        request += "User-Agent: afm\r\nConnection: close\r\n"
        if let body { request += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n" }
        request += "\r\n"
        var bytes = Array(request.utf8)
        if let body { bytes += body }
        do {
            var offset = 0
            while offset < bytes.count {
                let result = try bytes[offset...].withUnsafeBytes { try descriptor.write($0) }
                if case .processed(let count) = result { offset += count }
            }
            try descriptor.setNonBlocking(true)
        } catch {
            descriptor.close()
            throw ClientError("cannot send the request to \(url): \(error)")
        }
    }

    deinit { close() }

    /// Closes the connection (abandoning the response: afmd sees the disconnect and cancels the generation).
    func close() {
        guard !isClosed else { return }
        isClosed = true
        descriptor.close()
    }

    /// Reads whatever has arrived, at most about 1 MiB (a server that sends faster than the client reads must not
    /// make one call's result grow without bound: the socket stays readable for the next), and returns the decoded
    /// body bytes; `isComplete` turns true at the end.
    func readAvailable() throws -> [UInt8] {
        guard !isClosed, !isComplete else { return [] }
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let result = try buffer.withUnsafeMutableBytes { try descriptor.read(into: $0) }
            guard case .processed(let count) = result else { return output }
            if count == 0 {
                guard headDone else { throw ClientError("the server closed the connection without an answer") }
                if chunked && !decoder.isDone || contentLength.map({ bodyReceived < $0 }) ?? false {
                    throw ClientError("the server closed the connection in the middle of the answer")
                }
                isComplete = true
                return output
            }
            output += try consume(buffer[0..<count])
            if isComplete || output.count >= 1 << 20 { return output }
        }
    }

    /// Reads the whole response, waiting up to `timeoutMilliseconds` in total; a body of more than `maximumBytes`
    /// is an error (the server is not afmd, or not well: the client's memory stays bounded).
    func readToEnd(timeoutMilliseconds: Int32, maximumBytes: Int = 16 << 20) throws -> [UInt8] {
        var body: [UInt8] = []
        let deadline = Int64(SystemClock.monotonicNanoseconds() / 1_000_000) + Int64(timeoutMilliseconds)
        while !isComplete {
            let remaining = deadline - Int64(SystemClock.monotonicNanoseconds() / 1_000_000)
            guard remaining > 0 else { throw ClientError("no complete answer within \(timeoutMilliseconds / 1000) s") }
            _ = try descriptor.poll(readable: true, writable: false, timeoutMilliseconds: Int32(remaining))
            body += try readAvailable()
            guard body.count <= maximumBytes else { throw ClientError("the server's answer is larger than \(maximumBytes) bytes") }
        }
        return body
    }

    private func consume(_ bytes: ArraySlice<UInt8>) throws -> [UInt8] {
        var bytes = bytes
        if !headDone {
            head += bytes
            guard let end = findHeadEnd() else {
                guard head.count < 65_536 else { throw ClientError("the server's response head is too large") }
                return []
            }
            try parseHead(head[..<end])
            bytes = head[(end + 4)...]
            head = []
            headDone = true
        }
        if chunked {
            let out = try decoder.feed(bytes)
            if decoder.isDone { isComplete = true }
            return out
        }
        var take = bytes
        if let contentLength {
            take = bytes.prefix(contentLength - bodyReceived)
            bodyReceived += take.count
            if bodyReceived >= contentLength { isComplete = true }
        }
        return Array(take)
    }

    private func findHeadEnd() -> Int? {
        guard head.count >= 4 else { return nil }
        for index in 0...(head.count - 4)
        where head[index] == 13 && head[index + 1] == 10 && head[index + 2] == 13 && head[index + 3] == 10 {
            return index
        }
        return nil
    }

    private func parseHead(_ bytes: ArraySlice<UInt8>) throws {
        let lines = String(decoding: bytes, as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ", maxSplits: 2)
        guard statusParts.count >= 2, statusParts[0].hasPrefix("HTTP/1."), let code = Int(statusParts[1]) else {
            throw ClientError("the server did not answer with HTTP/1.1 (\(lines[0].prefix(40)))")
        }
        status = code
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            if name == "transfer-encoding", value.lowercased().contains("chunked") { chunked = true }
            if name == "content-length" {
                // A negative or non-numeric length is refused here (it would otherwise trap slicing the body).
                guard let length = Int(value), length >= 0 else {
                    throw ClientError("the server sent an invalid Content-Length (\(value.prefix(40)))")
                }
                contentLength = length
            }
        }
        if contentLength == 0 { isComplete = true }
    }
}
