// SPDX-License-Identifier: Apache-2.0
import AFMJSON
import AFMTestSupport
import Foundation
import Testing

/// `afm agent` end to end: the real binary against a real afmd (scripted backend) and a real MCP server, with
/// `--json` and in a pseudo-terminal (tmux).
@Suite(.serialized)
struct AgentCLITests {
    static var afm: String { TestPaths.binDirectory + "/afm" }

    static let addsThenAnswers = #"""
        [{"if_input_has":"function_call_output","then":[{"text":"The sum is 5."}],
          "else":[{"tool_call":{"name":"add","arguments":"{\"a\":2,\"b\":3}"}}]}]
        """#

    /// The environment of `afm`: no user configuration file.
    static func environment(_ home: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = home
        return environment
    }

    @Test func jsonPrintsEveryEventAsOneLineAndToolsComeFromMCP() throws {
        let gateway = try ScriptedGateway(models: [("m", Self.addsThenAnswers)])
        let python = try PythonEnvironment.python()
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let result = try CommandOutput.run(
            Self.afm,
            [
                "agent", "--url", gateway.url.description, "--model", "m", "--mcp", "calc=\(python) \(PythonEnvironment.mcpTestServer)",
                "--json", "Add 2 and 3",
            ], environment: Self.environment(home))
        #expect(result.status == 0, "\(result.output)")
        let events = result.output.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        #expect(events.count == result.output.split(separator: "\n").count, "every line is one JSON object: \(result.output)")
        #expect(events.map { $0["type"]?.stringValue ?? "" } == ["tool_call_started", "tool_call_completed", "text", "completed"])
        #expect(events[1]["output"]?["text"] == "5")
        #expect(events[3]["response"]?["text"] == "The sum is 5.")
        #expect(gateway.requests().first?.offeredTools == ["add", "refuse", "crash", "grow"])
    }

    @Test func theExitStatusComesFromTheAgentError() throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"error":{"code":"rate_limited","message":"slow down"}}]"#)])
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let failed = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "--json", "Hi"], environment: Self.environment(home))
        #expect(failed.status == 69, "\(failed.output)")
        let last = try JSONParser.parse(String(failed.output.split(separator: "\n").last ?? ""))
        #expect(last["type"] == "failed")
        #expect(last["error"]?["code"] == "rate_limited")
        let human = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "Hi"], environment: Self.environment(home))
        #expect(human.status == 69)
        #expect(human.output.contains("afm: rate_limited: slow down"))
        let usage = try CommandOutput.run(Self.afm, ["agent", "--max-tool-calls", "many"], environment: Self.environment(home))
        #expect(usage.status == 64)
        let noServer = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "--mcp", "ghost=afm-no-such-server", "Hi"],
            environment: Self.environment(home))
        #expect(noServer.status == 70, "\(noServer.output)")
        #expect(noServer.output.contains("ghost"))
    }

    @Test func aSchemaFileMakesASchemaTurn() throws {
        let steps = #"[{"json":{"text":"{\"choice\":\"wait\",\"reasoning\":\"too dark\"}","chunks":4}}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        try #"{"name":"decision","schema":{"type":"object","properties":{"reasoning":{"type":"string"},"choice":{"type":"string"}},"required":["reasoning","choice"]}}"#
            .write(toFile: home + "/decision.json", atomically: true, encoding: .utf8)
        let result = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "--schema", home + "/decision.json", "Go?"],
            environment: Self.environment(home))
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output == #"{"reasoning":"too dark","choice":"wait"}"# + "\n")
        #expect(gateway.requests().first?["output_format"]?["name"] == "decision")
    }

    @Test func theConfigFileNamesTheModelAndTheMCPServers() throws {
        let gateway = try ScriptedGateway(models: [("m", Self.addsThenAnswers)])
        let python = try PythonEnvironment.python()
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        try FileManager.default.createDirectory(atPath: home + "/afm", withIntermediateDirectories: true)
        try """
            [Agent]
            Model=m
            URL=\(gateway.url)
            MaxToolCalls=1

            [MCP.calc]
            Command=\(python)
            Args=\(PythonEnvironment.mcpTestServer)
            Env=PYTHONUNBUFFERED=1
            StartupTimeout=60
            """.write(toFile: home + "/afm/agent.conf", atomically: true, encoding: .utf8)
        let result = try CommandOutput.run(Self.afm, ["agent", "Add 2 and 3"], environment: Self.environment(home))
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("→ add({\"a\":2,\"b\":3})"))
        #expect(result.output.contains("← add: 5"))
        #expect(result.output.contains("The sum is 5."))
    }

    @Test func aSessionInAPseudoTerminalKeepsItsHistoryRecallsLinesAndCtrlCStopsATurn() throws {
        // Answers the first turn by echoing; a later turn (three messages in its input) says so, then hangs.
        let steps = #"[{"if_input_has":"message","at_least":3,"then":[{"text":"still here"},{"hang":true}],"else":[{"echo":true}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let command = "XDG_CONFIG_HOME='\(home)' '\(Self.afm)' agent --url \(gateway.url) --model m; echo \"EXIT=$?\""
        let pane = try TmuxPane(command: ["sh", "-c", command])
        #expect(pane.waitFor("you> "), "\(pane.screen())")
        try pane.line("hello agent")
        #expect(pane.waitFor("you> ", count: 2), "\(pane.screen())")
        #expect(pane.screen().contains("hello agent\nhello agent"), "\(pane.screen())")
        try pane.line("and now?")
        #expect(pane.waitFor("still here"), "\(pane.screen())")
        // Keys typed while a turn runs wait for the next prompt; Ctrl-C stops the turn.
        try pane.type("typed ahead")
        try pane.press("C-c")
        #expect(pane.waitFor("afm: cancelled"), "\(pane.screen())")
        #expect(pane.waitFor("you> typed ahead"), "\(pane.screen())")
        try pane.press("C-u")
        // Up recalls the lines entered in this session, newest first (the cancelled turn's line too).
        try pane.press("Up")
        #expect(pane.waitFor("you> and now?", count: 2), "\(pane.screen())")
        try pane.press("Up")
        #expect(pane.waitFor("you> hello agent", count: 2), "\(pane.screen())")
        try pane.press("C-u")
        // The second request carried the first turn; the cancelled turn left the history as it was.
        try pane.line("/quit")
        #expect(pane.waitFor("EXIT=0"), "\(pane.screen())")
        let requests = gateway.requests()
        #expect(requests.count == 2)
        #expect(requests[1].userTexts == ["hello agent", "and now?"])
    }
}
