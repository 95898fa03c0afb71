// SPDX-License-Identifier: Apache-2.0
import AFMTestSupport
import Foundation

/// A real llama-server (built by `scripts/build-llama`) serving SmolLM2 (fetched by `scripts/fetch-model`) on a
/// free loopback port, as an upstream of the private-cloud backend.
final class LlamaServer {
    let process = Process()
    let port: Int
    let logPath: String
    var baseURL: String { "http://127.0.0.1:\(port)/v1" }

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// The llama-server binary: `AFM_LLAMA_SERVER`, else the one in the prefix `scripts/build-llama --print-prefix`
    /// names for this machine. The cache may hold other builds (another CPU's, or one with AMX, which dies with
    /// SIGILL here), so the first directory found is not good enough.
    static let binary: String? = {
        if let path = ProcessInfo.processInfo.environment["AFM_LLAMA_SERVER"], !path.isEmpty { return path }
        let script = Process()
        script.executableURL = URL(fileURLWithPath: TestPaths.root + "/scripts/build-llama")
        script.arguments = ["--print-prefix"]
        script.environment = ProcessInfo.processInfo.environment.merging(["AFM_CACHE_DIR": TestPaths.root + "/.cache/afm"]) { _, new in new }
        let output = Pipe()
        script.standardOutput = output
        guard (try? script.run()) != nil else { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        script.waitUntilExit()
        guard script.terminationStatus == 0 else { return nil }
        let prefix = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        let path = prefix + "/bin/llama-server"
        return FileManager.default.isExecutableFile(atPath: path) ? path : nil
    }()

    /// The SmolLM2 model: `AFM_MODEL`, else `.cache/afm/models/smollm2-135m-instruct-q4_1.gguf`.
    static var model: String? {
        if let path = ProcessInfo.processInfo.environment["AFM_MODEL"], !path.isEmpty { return path }
        let path = TestPaths.root + "/.cache/afm/models/smollm2-135m-instruct-q4_1.gguf"
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// A chat template with function tools for SmolLM2 (whose own template has none, so llama-server would ignore
    /// `tool_choice`): NousResearch's Hermes 2 Pro tool-use template, ChatML with `<tool_call>` blocks, from the
    /// pinned llama.cpp sources that `scripts/build-llama` unpacked next to the binary it built. With a template that
    /// declares tools, `tool_choice: "required"` makes llama-server constrain the output with a grammar that ends in
    /// a call whose arguments match the tool's schema (common/chat-auto-parser-generator.cpp).
    static var toolTemplate: String? {
        guard let binary else { return nil }
        // <cache>/llama/<pin>-<flavour>/bin/llama-server → <cache>/src/llama.cpp-<pin>/models/templates/…
        let build = URL(fileURLWithPath: binary).deletingLastPathComponent().deletingLastPathComponent()
        let pin = build.lastPathComponent.split(separator: "-").first.map(String.init) ?? ""
        let path = build.deletingLastPathComponent().deletingLastPathComponent().path
            + "/src/llama.cpp-\(pin)/models/templates/NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"
        return FileManager.default.fileExists(atPath: path) ? path : nil
    }

    /// Whether the binary and the model exist (tests that need them are skipped otherwise).
    static var isAvailable: Bool { binary != nil && model != nil }

    /// Starts llama-server and waits until `/health` answers 200.
    init(extraArguments: [String] = []) throws {
        guard let binary = Self.binary, let model = Self.model else {
            throw Failure(description: "llama-server or the model is missing (run scripts/build-llama and scripts/fetch-model)")
        }
        port = freeLoopbackPort()
        logPath = TestPaths.makeTemporaryDirectory("llama") + "/llama-server.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments =
            ["-m", model, "--host", "127.0.0.1", "--port", "\(port)", "-c", "2048", "-np", "2", "-t", "1", "--jinja"]
            + extraArguments
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle(forWritingAtPath: logPath)
        try process.run()
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if !process.isRunning { throw Failure(description: "llama-server exited: \(log.suffix(2000))") }
            if let client = try? TestHTTPClient(port: port, timeoutSeconds: 5), let response = try? client.get("/health"),
                response.status == 200
            {
                return
            }
            usleep(100_000)
        }
        kill()
        throw Failure(description: "llama-server did not become healthy within 60 s: \(log.suffix(2000))")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// `GET /slots`: whether any slot is processing.
    func anySlotProcessing() -> Bool? {
        guard let client = try? TestHTTPClient(port: port, timeoutSeconds: 5), let response = try? client.get("/slots"),
            let slots = response.json?.arrayValue
        else { return nil }
        return slots.contains { $0["is_processing"]?.boolValue == true }
    }

    /// SIGKILL, as a crashed upstream.
    func kill() {
        if process.isRunning {
            Foundation.kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    deinit { kill() }
}

/// A loopback TCP port that was free a moment ago (bind to port 0, read it, close).
func freeLoopbackPort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// A loopback port nobody listens on (an upstream that is down).
func closedLoopbackPort() -> Int { freeLoopbackPort() }
