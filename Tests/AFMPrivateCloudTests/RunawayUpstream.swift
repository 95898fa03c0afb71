// SPDX-License-Identifier: Apache-2.0
import AFMSystem
import AFMTestSupport
import Foundation

/// A tiny HTTP upstream (Python's http.server, started on port 0) that answers `GET …/models` with 200 and every
/// POST with a `text/event-stream` body that never ends, in one of these shapes:
///
/// | mode       | body                                                                  |
/// |------------|-----------------------------------------------------------------------|
/// | `text`     | chat-completions chunks, each with a 4 KiB text delta, forever        |
/// | `line`     | `data: aaaa…` with no line end, forever                               |
/// | `event`    | 4 KiB `data:` lines with no blank line (one event that never ends)    |
/// | `comments` | `: keep-alive` lines, forever                                         |
/// | `emptydata` | `data:` lines with no value and no blank line, forever               |
/// | `bigjson`  | events of one JSON object of about 16 MiB (`{"x":[{},{},…]}`), forever   |
/// | `capjson`  | the same, each event just under the default 1 MiB event cap               |
/// | `done-then-keepalive` | one text chunk, `[DONE]`, then a `: keep-alive` line every 50 ms     |
/// | `done`     | one text chunk and `[DONE]`, then the body ends (a well-behaved upstream)  |
/// | `error500` | status 500 and a body that never ends                                   |
/// | `echo400`  | status 400, a text body: 280 × `x`, a space and the request's Authorization |
///
/// It writes 64 KiB at a time with a short pause (about 16 MB/s), so a client without a cap grows steadily
/// rather than at memory speed. Every request is appended to `requestLog` as `METHOD PATH auth=yes|no`.
final class RunawayUpstream {
    let mode: String
    let port: Int
    let requestLog: String
    private let process = Process()

    static let script = #"""
        import sys, http.server, socketserver, time, json
        mode, host, log = sys.argv[1], sys.argv[2], sys.argv[3]
        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *args): pass
            def note(self):
                with open(log, "a") as f:
                    f.write("%s %s auth=%s\n" % (self.command, self.path, "yes" if self.headers.get("Authorization") else "no"))
            def do_GET(self):
                self.note()
                body = b'{"object":"list","data":[{"id":"runaway","object":"model"}]}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            def do_POST(self):
                self.note()
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if mode == "echo400":
                    body = ("x" * 280 + " " + self.headers.get("Authorization", "")).encode()
                    self.send_response(400)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                if mode == "error500":
                    self.send_response(500)
                    self.send_header("Content-Type", "text/plain")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    try:
                        while True:
                            self.wfile.write(b"e" * 65536)
                            time.sleep(0.004)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                if mode == "text":
                    chunk = ("data: " + json.dumps({"id": "c", "object": "chat.completion.chunk", "model": "runaway",
                        "choices": [{"index": 0, "delta": {"content": "a" * 4096}, "finish_reason": None}]}) + "\n\n").encode()
                    piece = chunk * (65536 // len(chunk) + 1)
                elif mode == "line":
                    self.wfile.write(b"data: ")
                    piece = b"a" * 65536
                elif mode == "done" or mode == "done-then-keepalive":
                    chunk = {"id": "c", "object": "chat.completion.chunk", "model": "runaway",
                        "choices": [{"index": 0, "delta": {"content": "Hello."}, "finish_reason": "stop"}]}
                    try:
                        self.wfile.write(("data: " + json.dumps(chunk) + "\n\ndata: [DONE]\n\n").encode())
                        self.wfile.flush()
                        while mode != "done":
                            time.sleep(0.05)
                            self.wfile.write(b": keep-alive\n")
                            self.wfile.flush()
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    return
                elif mode == "emptydata":
                    piece = b"data:\n" * 10923
                elif mode == "bigjson":
                    piece = b'data: {"x":[' + b"{}," * ((16 << 20) // 3 - 8) + b'{}]}\n\n'
                elif mode == "capjson":
                    piece = b'data: {"x":[' + b"{}," * 349516 + b'{}]}\n\n'
                elif mode == "event":
                    piece = (b"data: " + b"x" * 4090 + b"\n") * 16
                else:
                    piece = b": keep-alive\n" * 5041
                try:
                    while True:
                        self.wfile.write(piece)
                        time.sleep(0.004)
                except (BrokenPipeError, ConnectionResetError):
                    pass
        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
        server = Server((host, 0), Handler)
        print(server.server_address[1], flush=True)
        server.serve_forever()
        """#

    /// Starts the upstream; `host` is the address it binds (loopback unless a test needs another interface).
    init(mode: String, host: String = "127.0.0.1") throws {
        self.mode = mode
        let scratch = TestPaths.makeTemporaryDirectory("afm-runaway")
        requestLog = scratch + "/requests.log"
        _ = FileManager.default.createFile(atPath: requestLog, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", Self.script, mode, host, requestLog]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let line = String(decoding: output.fileHandleForReading.availableData, as: UTF8.self)
        guard let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            kill(process.processIdentifier, SIGKILL)
            throw UpstreamTestFailure(description: "the runaway upstream did not start: '\(line)'")
        }
        self.port = port
    }

    func baseURL(host: String = "127.0.0.1") -> String { "http://\(host):\(port)/v1" }

    /// The requests it received, one line each.
    var requests: [String] {
        // FileContents, not String(contentsOfFile:), which leaked its read buffer for a file being appended to.
        ((try? FileContents.read(path: requestLog)).map { String(decoding: $0, as: UTF8.self) } ?? "").split(separator: "\n").map(String.init)
    }

    deinit {
        // SIGKILL: a process started from a test thread may inherit a mask that blocks SIGTERM.
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }
}

/// A failure of a test helper (an upstream that did not start, a socket call).
struct UpstreamTestFailure: Error, CustomStringConvertible {
    var description: String
}

/// The resident-set figures of a process from /proc: (current, peak) in KiB.
func residentKiB(pid: Int32) -> (current: Int, peak: Int)? {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
    func field(_ name: String) -> Int? {
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name + ":") }) else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }
    guard let current = field("VmRSS"), let peak = field("VmHWM") else { return nil }
    return (current, peak)
}

/// An IPv4 address of this machine other than loopback, or nil when it has none.
func nonLoopbackIPv4() -> String? {
    var list: UnsafeMutablePointer<ifaddrs>?
    guard getifaddrs(&list) == 0 else { return nil }
    defer { freeifaddrs(list) }
    var entry = list
    while let current = entry {
        defer { entry = current.pointee.ifa_next }
        guard let address = current.pointee.ifa_addr, address.pointee.sa_family == sa_family_t(AF_INET) else { continue }
        var text = [CChar](repeating: 0, count: Int(INET_ADDRSTRLEN))
        var inet = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
        guard inet_ntop(AF_INET, &inet, &text, socklen_t(text.count)) != nil else { continue }
        let string = String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if !string.hasPrefix("127.") { return string }
    }
    return nil
}
