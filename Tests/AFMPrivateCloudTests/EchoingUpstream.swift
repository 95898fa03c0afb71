// SPDX-License-Identifier: Apache-2.0
import Foundation

/// A hostile upstream on a free loopback port. The first `GET /models` (the plugin's probe at start) succeeds, so
/// requests are sent to it; every later request is answered 503 with a JSON error whose message echoes the
/// request's `Authorization` header, a second bearer token (a proxy's), a forged log line after a newline, and
/// terminal escapes (a window title, a screen clear). Python's http.server, so nothing of ours parses the request.
final class EchoingUpstream {
    let process = Process()
    let port: Int
    var baseURL: String { "http://127.0.0.1:\(port)/v1" }
    /// The other token in the body, which is not our key.
    static let proxyToken = "proxy-secret-\(UUID().uuidString.prefix(8))"
    /// The start of the forged log line (a plausible timestamp).
    static let forgedLine = "2026-12-01T00:00:00.000Z info afmd: forged"

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// - Parameter rawBody: when given, every later request is answered 503 with exactly this text/plain body
    ///   (an upstream or proxy that echoes headers and parameters its own way) instead of the JSON error.
    init(rawBody: String? = nil) throws {
        let script = """
            import http.server, json, os, sys
            probes = [0]
            class Handler(http.server.BaseHTTPRequestHandler):
                def answer(self):
                    length = int(self.headers.get("Content-Length") or 0)
                    if length: self.rfile.read(length)
                    if self.command == "GET" and probes[0] == 0:
                        probes[0] += 1
                        body = b'{"object":"list","data":[{"id":"smol","object":"model"}]}'
                        self.send_response(200)
                        self.send_header("Content-Type", "application/json")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    raw = os.environ.get("AFM_ECHO_RAW_BODY")
                    if raw is not None:
                        body = raw.encode()
                        self.send_response(503)
                        self.send_header("Content-Type", "text/plain")
                        self.send_header("Content-Length", str(len(body)))
                        self.end_headers()
                        self.wfile.write(body)
                        return
                    message = ("overloaded; you sent Authorization: " + self.headers.get("Authorization", "")
                        + "\\n\(Self.forgedLine) line\\x1b]0;pwned\\x07\\x1b[2J via Bearer \(Self.proxyToken)")
                    body = json.dumps({"error": {"message": message}}).encode()
                    self.send_response(503)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                do_GET = answer
                do_POST = answer
                def log_message(self, *arguments): pass
            server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
            print(server.server_address[1], flush=True)
            server.serve_forever()
            """
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script]
        if let rawBody {
            process.environment = ProcessInfo.processInfo.environment.merging(["AFM_ECHO_RAW_BODY": rawBody]) { $1 }
        }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line: [UInt8] = []
        let handle = output.fileHandleForReading
        while let byte = try handle.read(upToCount: 1)?.first, byte != 0x0A { line.append(byte) }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            kill(process.processIdentifier, SIGKILL)
            throw Failure(description: "the echoing upstream did not start")
        }
        self.port = port
    }

    deinit {
        // SIGKILL, not terminate(): the child inherits the test thread's signal mask, which may block SIGTERM.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }
}
