// SPDX-License-Identifier: Apache-2.0
import AFMAgent
import AFMJSON
import Foundation
import Glibc
import Synchronization
import Testing

/// The MCP client against a real MCP server written with PyPI's `mcp` package, started by the test.
@Suite(.serialized)
struct MCPServerTests {
    static func configuration(_ arguments: [String] = [], startupTimeout: Duration = .seconds(60)) throws -> MCPServerConfiguration {
        MCPServerConfiguration(
            name: "test", command: try PythonEnvironment.python(), arguments: [PythonEnvironment.mcpTestServer] + arguments,
            environment: ["PYTHONUNBUFFERED": "1"], startupTimeout: startupTimeout, toolTimeout: .seconds(30))
    }

    @Test func listsAndCallsTools() async throws {
        let server = try await MCPServer.start(try Self.configuration())
        #expect(MCPServer.supportedProtocolVersions.contains(server.protocolVersion))
        #expect(server.serverInfo["name"] == "afm-test-server")
        #expect(server.instructions == "Tools for AFM's tests.")
        #expect(server.tools.map(\.name) == ["add", "refuse", "crash", "grow"])
        #expect(server.tools[0].inputSchema["properties"]?["a"]?["type"] == "integer")
        let sum = try await server.callTool("add", arguments: ["a": 2, "b": 40])
        #expect(sum == .text("42"))
        // The handshake's own listing and a later one agree.
        #expect(try await server.listTools().map(\.name) == server.tools.map(\.name))
        // Closing its input is enough for this server: it exits by itself, before any signal.
        #expect(await server.shutdown() == "exit status 0")
    }

    @Test func aToolListChangedNotificationRefreshesTheToolsOfTheNextTurn() async throws {
        let server = try await MCPServer.start(try Self.configuration())
        #expect(await server.currentTools().map(\.name) == ["add", "refuse", "crash", "grow"])
        #expect(try await server.callTool("grow", arguments: [:]) == .text("multiply added"))
        // The notification is sent before the call's result, on the same stream: it has been handled by now.
        #expect(await server.currentTools().map(\.name) == ["add", "refuse", "crash", "grow", "multiply"])
        #expect(try await server.callTool("multiply", arguments: ["a": 6, "b": 7]) == .text("42"))
        await server.shutdown()
    }

    @Test func aServerThatIgnoresItsInputClosingAndSIGTERMIsKilled() async throws {
        let server = try await MCPServer.start(try Self.configuration(["stubborn"]))
        #expect(try await server.callTool("add", arguments: ["a": 1, "b": 2]) == .text("3"))
        // stdin closed: it goes on; SIGTERM 2 s later: ignored; SIGKILL 2 s after that.
        #expect(await server.shutdown() == "signal 9 (SIGKILL)")
        do {
            _ = try await server.callTool("add", arguments: ["a": 1, "b": 2])
            Issue.record("a stopped server answered")
        } catch {
            #expect(error.message.contains("shut down"))
        }
    }

    @Test func aCallFromATaskCancelledBeforeItStartsFailsAsCancelled() async throws {
        let server = try await MCPServer.start(try Self.configuration())
        // The task is cancelled before the call is made: the cancellation handler runs before the request is
        // registered, so it must not be lost (before, the request went out and waited for its answer: "3").
        let call = Task { () async -> Result<AgentToolOutput, AgentError> in
            withUnsafeCurrentTask { $0?.cancel() }
            do throws(AgentError) {
                return .success(try await server.callTool("add", arguments: ["a": 1, "b": 2]))
            } catch {
                return .failure(error)
            }
        }
        switch await call.value {
        case .success(let output): Issue.record("a cancelled call was answered: \(output)")
        case .failure(let error): #expect(error.code == .cancelled, "\(error)")
        }
        // The connection still serves later calls.
        #expect(try await server.callTool("add", arguments: ["a": 1, "b": 2]) == .text("3"))
        await server.shutdown()
    }

    @Test func toolsListFollowsNextCursorAcrossPages() async throws {
        let server = try await MCPServer.start(try Self.configuration(["paged"]))
        #expect(server.tools.map(\.name) == ["t0", "t1", "t2", "t3", "t4"])
        #expect(try await server.callTool("t3", arguments: [:]) == .text("called t3"))
        await server.shutdown()
    }

    @Test func anIsErrorResultIsAnErrorOutput() async throws {
        let server = try await MCPServer.start(try Self.configuration())
        let output = try await server.callTool("refuse", arguments: ["reason": "not today"])
        #expect(output.isError)
        #expect(output.text.hasPrefix("Error"))
        // An unknown tool is a JSON-RPC error or an isError result; either way the caller learns it failed.
        do {
            let unknown = try await server.callTool("nope", arguments: [:])
            #expect(unknown.isError)
        } catch {
            #expect(error.code == .toolFailed)
        }
        await server.shutdown()
    }

    @Test func aServerThatExitsMidCallFailsItAndEveryLaterCall() async throws {
        let server = try await MCPServer.start(try Self.configuration())
        do {
            _ = try await server.callTool("crash", arguments: [:])
            Issue.record("a crashing server answered")
        } catch {
            #expect(error.code == .toolFailed)
            #expect(error.message.contains("exited (exit status 3)"), "\(error)")
            #expect(error.message.contains("crashing on purpose"), "\(error)")
        }
        do {
            _ = try await server.callTool("add", arguments: ["a": 1, "b": 1])
            Issue.record("a dead server answered")
        } catch {
            #expect(error.message.contains("exited"))
        }
        #expect(await server.shutdown() == "exit status 3")
    }

    /// A server that exits leaving a child with its stderr: the call fails at once with the exit and its last words.
    /// Failed before: the reader blocked reading the stderr pipe the child still held, until the child ended (30 s).
    @Test func aServerThatExitsLeavingAChildWithItsStderrFailsTheCallAtOnce() async throws {
        let server = try await MCPServer.start(try Self.configuration(["leaves", "orphan"]))
        try await Self.expectTheCallToGoFailsAtOnce(server, saying: ["exited (exit status 3)", "leaving a child behind"])
        #expect(await server.shutdown() == "exit status 3")
        // And the connection's threads end, though the child still holds the stderr pipe for 30 s (the reader
        // once went on to read that pipe, already drained, in the round it saw the end of stdout).
        let quiet = ContinuousClock.now + .seconds(10)
        while Self.mcpThreads() > 0 && ContinuousClock.now < quiet { try await Task.sleep(for: .milliseconds(50)) }
        #expect(Self.mcpThreads() == 0)
    }

    /// A server that closes its stdout and stays: the call fails at once, not at its 30 s tool timeout.
    @Test func aServerThatClosesItsOutputFailsTheCallAtOnce() async throws {
        let server = try await MCPServer.start(try Self.configuration(["leaves", "closes"]))
        try await Self.expectTheCallToGoFailsAtOnce(server, saying: ["closed its output"])
        await server.shutdown()
    }

    /// Calls the `leaves` server's `go` tool: it must fail as a tool failure whose message holds every one of
    /// `parts`, within 10 s (not at its 30 s tool timeout).
    static func expectTheCallToGoFailsAtOnce(_ server: MCPServer, saying parts: [String]) async throws {
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try await server.callTool("go", arguments: [:])
            Issue.record("a server that left answered")
        } catch {
            #expect(error.code == .toolFailed)
            for part in parts { #expect(error.message.contains(part), "\(error)") }
        }
        #expect(clock.now - start < .seconds(10), "the call took \(clock.now - start)")
    }

    @Test func aServerThatNeverAnswersInitializeTimesOut() async throws {
        let configuration = try Self.configuration(["silent"], startupTimeout: .seconds(1))
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try await MCPServer.start(configuration)
            Issue.record("a silent server started")
        } catch {
            #expect(error.code == .toolFailed)
            #expect(error.message.contains("did not answer initialize within 1 s"), "\(error)")
        }
        // The timeout fired and the server was stopped (not waited for forever).
        #expect(clock.now - start < .seconds(30))
    }

    @Test func aCommandThatDoesNotExistIsAClearError() async throws {
        do {
            _ = try await MCPServer.start(MCPServerConfiguration(name: "ghost", command: "afm-no-such-mcp-server"))
            Issue.record("a missing command started")
        } catch {
            #expect(error.code == .toolFailed)
            #expect(error.message.contains("ghost"))
        }
    }

    @Test func mcpToolsInAnAgentTurnAndAServerDyingMidTurn() async throws {
        let callsAddThenCrash = #"""
            [{"if_input_has":"function_call_output","at_least":2,"then":[{"text":"the sum is in"}],
              "else":[{"if_input_has":"function_call_output","then":[{"tool_call":{"name":"crash","arguments":"{}"}}],
                       "else":[{"tool_call":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}]}]}]
            """#
        let gateway = try ScriptedGateway(models: [("m", callsAddThenCrash)])
        let server = try await MCPServer.start(try Self.configuration())
        let agent = Agent(configuration: .init(url: gateway.url, model: "m", toolProviders: [server]))
        let response = try await agent.run("Add 2 and 3").response()
        #expect(response.text == "the sum is in")
        #expect(response.toolCalls.map(\.call.name) == ["add", "crash"])
        #expect(response.toolCalls[0].output == .text("5"))
        #expect(response.toolCalls[1].output.isError)
        #expect(response.toolCalls[1].output.text.contains("exited"))
        // The gateway accepted the server's schemas as tool parameters.
        #expect(gateway.requests().first?.offeredTools == ["add", "refuse", "crash", "grow"])
        await server.shutdown()
    }

    /// The threads of this process whose name starts with `afm-mcp` (an MCP connection's reader, writer, stopper).
    static func mcpThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { task in
            ((try? String(contentsOfFile: "/proc/self/task/\(task)/comm", encoding: .utf8)) ?? "").hasPrefix("afm-mcp")
        }.count
    }

    static func openDescriptors() -> Int {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []).count
    }

    /// Starts a server, uses it and drops it without `shutdown()`; returns its pid.
    static func startAndDrop() async throws -> Int32 {
        let server = try await MCPServer.start(try Self.configuration())
        #expect(try await server.callTool("add", arguments: ["a": 1, "b": 2]) == .text("3"))
        return server.processID
    }

    /// A dropped server stops as shutdown() would: its process ends and is reaped, its threads end and its
    /// descriptors close. Failed before (no deinit): the child, two threads and five descriptors stayed for ever.
    @Test func aDroppedServerEndsItsProcessThreadsAndDescriptors() async throws {
        // A first server dropped the same way, so that what the process opens once is open before counting; its
        // process gone (at most 5 s: before the fix it never went), every MCP connection's threads ended (at most
        // 10 s), and the descriptor count steady for a second (at most 10 s): what earlier tests left closing
        // lazily must not close during the count (it once fell from 36 to 30 in a run of the whole target).
        let warmUp = try await Self.startAndDrop()
        let settle = ContinuousClock.now + .seconds(5)
        while kill(warmUp, 0) == 0 && ContinuousClock.now < settle { try await Task.sleep(for: .milliseconds(50)) }
        let quiet = ContinuousClock.now + .seconds(10)
        while Self.mcpThreads() > 0 && ContinuousClock.now < quiet { try await Task.sleep(for: .milliseconds(50)) }
        var descriptors = Self.openDescriptors()
        let steady = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < steady {
            try await Task.sleep(for: .seconds(1))
            let now = Self.openDescriptors()
            if now == descriptors { break }
            descriptors = now
        }
        let threads = Self.mcpThreads()
        let pid = try await Self.startAndDrop()
        let deadline = ContinuousClock.now + .seconds(15)
        func gone() -> Bool {
            Self.mcpThreads() == threads && Self.openDescriptors() == descriptors && kill(pid, 0) != 0
        }
        while !gone() && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        #expect(kill(pid, 0) != 0 && errno == ESRCH, "the dropped server's process \(pid) is still there (or a zombie)")
        #expect(Self.mcpThreads() == threads, "afm-mcp threads: \(Self.mcpThreads()), before: \(threads)")
        #expect(Self.openDescriptors() == descriptors, "descriptors: \(Self.openDescriptors()), before: \(descriptors)")
    }

    /// A server that stops reading its input: calls made once 16 MiB wait for it fail at once with `busy`
    /// (naming the limit) instead of queueing without end; the calls queued before wait until the server is shut
    /// down. Failed before: every call was queued (24 MiB) and waited.
    @Test func callsToAServerThatStopsReadingFailBusyInsteadOfQueueingWithoutEnd() async throws {
        let server = try await MCPServer.start(try Self.configuration(["deaf"]))
        #expect(server.tools.map(\.name) == ["echo"])
        let megabyte = JSONValue.string(String(repeating: "x", count: 1 << 20))
        final class Refusals: Sendable { let errors = Mutex<[AgentError]>([]) }
        let busy = Refusals()
        let calls = (0..<24).map { _ in
            Task { () -> AgentError? in
                do throws(AgentError) {
                    _ = try await server.callTool("echo", arguments: ["text": megabyte])
                    return nil
                } catch {
                    if error.code == .busy { busy.errors.withLock { $0.append(error) } }
                    return error
                }
            }
        }
        // The refused calls fail at once; the others wait for an answer that never comes.
        let deadline = ContinuousClock.now + .seconds(20)
        while busy.errors.withLock({ $0.count }) < 8 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(50)) }
        try await Task.sleep(for: .milliseconds(500))
        let refused = busy.errors.withLock { $0 }
        await server.shutdown()
        var errors: [AgentError] = []
        for call in calls { if let error = await call.value { errors.append(error) } }
        #expect(errors.count == 24, "a call to a deaf server succeeded")
        // 16 MiB hold at most 16 of these 1 MiB requests: the other 8 or more were refused before the shutdown.
        #expect(refused.count >= 8 && refused.count == errors.filter { $0.code == .busy }.count, "\(errors.map(\.code))")
        #expect(refused.allSatisfy { $0.message.contains("not reading its input") && $0.message.contains("\(16 << 20)") })
        #expect(errors.filter { $0.code != .busy }.allSatisfy { $0.message.contains("shut down") }, "\(errors)")
    }
}
