// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import AFMTestSupport
import Foundation
import Glibc
import Testing

/// What the MCP client sends and what it makes of the answers, against the `extras` mode of the real test server
/// (PyPI's `mcp`), which reports every message it read: image content, the server's working directory and
/// environment, call timeouts and cancellations.
@Suite(.serialized)
struct MCPCallTests {
    static func extras(
        directory: String? = nil, environment: [String: String] = [:], toolTimeout: Duration = .seconds(30)
    ) throws -> MCPServerConfiguration {
        MCPServerConfiguration(
            name: "extras", command: try PythonEnvironment.python(), arguments: [PythonEnvironment.mcpTestServer, "extras"],
            environment: environment.merging(["PYTHONUNBUFFERED": "1"]) { mine, _ in mine }, directory: directory,
            startupTimeout: .seconds(60), toolTimeout: toolTimeout)
    }

    /// The messages the server read so far (`method`, `id`, `requestId`) and the sleeps the client cancelled.
    static func received(_ server: MCPServer) async throws -> (messages: [JSONValue], cancelledSleeps: [Double]) {
        let output = try await server.callTool("received", arguments: [:])
        guard case .text(let text)? = output.content.first else { throw Failure(description: "received answered \(output)") }
        let report = try JSONParser.parse(text)
        return (report["messages"]?.arrayValue ?? [], (report["cancelled_sleeps"]?.arrayValue ?? []).compactMap { $0.numberValue?.doubleValue })
    }

    struct Failure: Error, CustomStringConvertible { var description: String }

    /// The ids of the `tools/call` requests the server read, and the request ids of the cancellations it read.
    static func calls(_ messages: [JSONValue]) -> (calls: [Int], cancellations: [Int]) {
        (
            messages.filter { $0["method"] == "tools/call" }.compactMap { $0["id"]?.numberValue?.intValue },
            messages.filter { $0["method"] == "notifications/cancelled" }.compactMap { $0["requestId"]?.numberValue?.intValue }
        )
    }

    static func realPath(_ path: String) -> String {
        guard let resolved = realpath(path, nil) else { return path }
        defer { free(resolved) }
        return String(cString: resolved)
    }

    /// `Directory` and `Env` of a server's configuration reach its process (the server reports both).
    @Test func theServerRunsInItsDirectoryWithItsEnvironment() async throws {
        let directory = TestPaths.makeTemporaryDirectory("afm-mcp-cwd")
        let server = try await MCPServer.start(
            try Self.extras(directory: directory, environment: ["AFM_MCP_TEST_VALUE": "from the configuration"]))
        let output = try await server.callTool("whereami", arguments: [:])
        let report = try JSONParser.parse(output.text)
        #expect(report["cwd"]?.stringValue == Self.realPath(directory), "\(output.text)")
        #expect(report["value"] == "from the configuration")
        await server.shutdown()
        // Without a directory the server runs in this process's working directory.
        let here = try await MCPServer.start(try Self.extras())
        let plain = try JSONParser.parse(try await here.callTool("whereami", arguments: [:]).text)
        #expect(plain["cwd"]?.stringValue == Self.realPath(FileManager.default.currentDirectoryPath))
        #expect(plain["value"]?.isNull == true)
        await here.shutdown()
    }

    /// A tool's image content comes back as an image part (MIME type and base64 as sent), after its text part.
    @Test func imageContentIsAnImagePart() async throws {
        let server = try await MCPServer.start(try Self.extras())
        let output = try await server.callTool("picture", arguments: [:])
        #expect(!output.isError)
        #expect(output.content.count == 2)
        #expect(output.content.first == .text("a red square"))
        guard case .image(let mimeType, let base64)? = output.content.last else {
            Issue.record("no image part: \(output)")
            return
        }
        #expect(mimeType == "image/png")
        let bytes = try #require(Data(base64Encoded: base64))
        #expect(Array(bytes.prefix(8)) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        await server.shutdown()
    }

    /// A call cancelled while the server works on it: the caller gets `cancelled` at once, and the server gets
    /// `notifications/cancelled` for that request (the SDK then cancels the tool).
    @Test func aCancelledCallTellsTheServer() async throws {
        let server = try await MCPServer.start(try Self.extras())
        let call = Task { () async -> Result<AgentToolOutput, AgentError> in
            do throws(AgentError) {
                return .success(try await server.callTool("sleep", arguments: ["seconds": 30]))
            } catch {
                return .failure(error)
            }
        }
        // Cancelled once the server has read the call: two calls read, the sleep and a `received`.
        var read = 0
        for _ in 0..<200 where read < 2 {
            try await Task.sleep(for: .milliseconds(50))
            read = Self.calls(try await Self.received(server).messages).calls.count
        }
        #expect(read >= 2)
        call.cancel()
        switch await call.value {
        case .success(let output): Issue.record("a cancelled call was answered: \(output)")
        case .failure(let error): #expect(error.code == .cancelled, "\(error)")
        }
        var report = try await Self.received(server)
        for _ in 0..<100 where report.cancelledSleeps.isEmpty {
            try await Task.sleep(for: .milliseconds(50))
            report = try await Self.received(server)
        }
        let (calls, cancellations) = Self.calls(report.messages)
        #expect(cancellations.count == 1 && calls.contains(cancellations[0]), "\(report.messages)")
        #expect(report.cancelledSleeps == [30])
        await server.shutdown()
    }

    /// A call whose task was cancelled before it was sent sends nothing: no request, and no
    /// `notifications/cancelled` for an id the server never saw. Failed before: the cancellation handler sent
    /// `notifications/cancelled` with the unsent request's id.
    @Test func aCallCancelledBeforeItIsSentSendsNoCancellation() async throws {
        let server = try await MCPServer.start(try Self.extras())
        let call = Task { () async -> Result<AgentToolOutput, AgentError> in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(AgentError) {
                return .success(try await server.callTool("sleep", arguments: ["seconds": 0]))
            } catch {
                return .failure(error)
            }
        }
        switch await call.value {
        case .success(let output): Issue.record("a cancelled call was answered: \(output)")
        case .failure(let error): #expect(error.code == .cancelled, "\(error)")
        }
        // The messages reach the server in the order they were queued: this call's request comes after anything
        // the cancelled call queued.
        let messages = try await Self.received(server).messages
        #expect(!messages.contains { $0["method"] == "notifications/cancelled" }, "\(messages)")
        #expect(Self.calls(messages).calls.count == 1, "only the received call was sent: \(messages)")
        await server.shutdown()
    }

    /// A call the server does not answer within the tool timeout fails with `tool_failed` naming the timeout,
    /// the server is told (`notifications/cancelled`, as the MCP lifecycle asks of a request that timed out) and
    /// stops the tool, and the connection serves the next call. Failed before: no cancellation was sent, so the
    /// server went on with the abandoned call.
    @Test func aCallOverTheToolTimeoutFailsAndIsCancelledOnTheServer() async throws {
        let server = try await MCPServer.start(try Self.extras(toolTimeout: .seconds(1)))
        let clock = ContinuousClock()
        let start = clock.now
        do {
            let output = try await server.callTool("sleep", arguments: ["seconds": 20])
            Issue.record("a call over its timeout was answered: \(output)")
        } catch {
            #expect(error.code == .toolFailed)
            #expect(error.message.contains("did not answer tools/call within 1 s"), "\(error)")
        }
        #expect(clock.now - start < .seconds(15))
        var report = try await Self.received(server)
        for _ in 0..<100 where report.cancelledSleeps.isEmpty {
            try await Task.sleep(for: .milliseconds(50))
            report = try await Self.received(server)
        }
        let (calls, cancellations) = Self.calls(report.messages)
        #expect(cancellations == Array(calls.prefix(1)), "\(report.messages)")
        #expect(report.cancelledSleeps == [20])
        await server.shutdown()
    }
}

/// The handshake's version negotiation and the middle step of shutdown.
@Suite(.serialized)
struct MCPLifecycleTests {
    /// A server that answers an older revision this client speaks is used with that revision; one that answers a
    /// revision this client does not speak is stopped, and starting it fails with `tool_failed` naming both sides.
    @Test(arguments: ["2024-11-05", "2025-03-26"]) func anOlderRevisionTheClientSpeaksIsUsed(version: String) async throws {
        let server = try await MCPServer.start(try MCPServerTests.configuration(["version", version]))
        #expect(server.protocolVersion == version)
        #expect(server.tools.map(\.name) == ["add"])
        #expect(try await server.callTool("add", arguments: ["a": 40, "b": 2]) == .text("42"))
        await server.shutdown()
    }

    @Test func aRevisionTheClientDoesNotSpeakIsRefused() async throws {
        let configuration = try MCPServerTests.configuration(["version", "2023-01-01"])
        do {
            let server = try await MCPServer.start(configuration)
            Issue.record("a server speaking 2023-01-01 was used (\(server.protocolVersion))")
        } catch {
            #expect(error.code == .toolFailed)
            #expect(error.message.contains("speaks protocol \"2023-01-01\""), "\(error)")
            #expect(error.message.contains("2025-11-25"), "\(error)")
        }
    }

    /// A server that goes on after its input closed but honours SIGTERM ends with SIGTERM (the step between the
    /// closed input and SIGKILL).
    @Test func aServerThatIgnoresItsClosedInputEndsWithSIGTERM() async throws {
        let server = try await MCPServer.start(try MCPServerTests.configuration(["lingers"]))
        #expect(try await server.callTool("add", arguments: ["a": 1, "b": 2]) == .text("3"))
        #expect(await server.shutdown() == "signal 15 (SIGTERM)")
    }
}
