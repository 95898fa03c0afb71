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

    /// `--instructions TEXT` and `-f FILE` are the system text of every step (the backend's `system`); an
    /// unreadable file is a usage error.
    @Test func theInstructionsComeFromTheFlagOrAFile() throws {
        let gateway = try ScriptedGateway(models: [("m", #"[{"text":"aye"}]"#)])
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let given = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "--instructions", "Speak like a pirate.", "Hi"],
            environment: Self.environment(home))
        #expect(given.status == 0, "\(given.output)")
        let file = home + "/instructions.txt"
        let text = "Answer in one word.\nNever apologize.\n"
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        let fromFile = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "-f", file, "Hi"], environment: Self.environment(home))
        #expect(fromFile.status == 0, "\(fromFile.output)")
        let none = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "Hi"], environment: Self.environment(home))
        #expect(none.status == 0, "\(none.output)")
        let requests = gateway.requests()
        #expect(requests.count == 3)
        #expect(requests.first?["system"] == ["Speak like a pirate."])
        #expect(requests.dropFirst().first?["system"] == [.string(text)])
        let unset = requests.last?["system"]?.arrayValue ?? []
        #expect(unset.isEmpty, "\(requests.last ?? .null)")
        let missing = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "-f", home + "/absent.txt", "Hi"],
            environment: Self.environment(home))
        #expect(missing.status == 64)
        #expect(missing.output.contains("cannot read the instructions file \(home)/absent.txt"), "\(missing.output)")
        #expect(gateway.requests().count == 3)
    }

    /// `--tool-timeout S` limits every tool call, MCP calls included: a call past it is an error output and the
    /// turn goes on. Failed before: it set only the local tools' timeout, which `afm agent` has none of, so the MCP
    /// call ran its 20 s (under the server's default 60 s) and answered "slept 20".
    @Test func theToolTimeoutFlagLimitsEveryMCPCall() throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"gave up waiting"}],"else":[{"tool_call":{"name":"sleep","arguments":"{\"seconds\":20}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let python = try PythonEnvironment.python()
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let clock = ContinuousClock()
        let start = clock.now
        let result = try CommandOutput.run(
            Self.afm,
            [
                "agent", "--url", gateway.url.description, "--model", "m", "--mcp", "extras=\(python) \(PythonEnvironment.mcpTestServer) extras",
                "--tool-timeout", "1", "--json", "Sleep",
            ], environment: Self.environment(home))
        #expect(clock.now - start < .seconds(18))
        #expect(result.status == 0, "\(result.output)")
        let events = result.output.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        let completed = events.first { $0["type"] == "tool_call_completed" }
        #expect(completed?["output"]?["is_error"] == true, "\(result.output)")
        #expect(completed?["output"]?["text"]?.stringValue?.contains("did not answer tools/call within 1 s") == true, "\(result.output)")
        #expect(events.last?["response"]?["text"] == "gave up waiting")
        // A number of seconds too large for the clock is a usage error. Crashed before (Int overflow, signal 4).
        let huge = try CommandOutput.run(
            Self.afm, ["agent", "--url", gateway.url.description, "--model", "m", "--tool-timeout", "1e300", "Hi"],
            environment: Self.environment(home))
        #expect(huge.status == 64, "\(huge.output)")
        #expect(huge.output.contains("--tool-timeout takes seconds ≥ 0.001"))
    }

    /// A timeout under a millisecond is refused (it would become 0 ms, a limit no call can meet): `--tool-timeout`
    /// with exit 64, a file's `StartupTimeout` with an error naming its line. Failed before: both were taken
    /// as 0 and the command went on to run.
    @Test func timeoutsUnderAMillisecondAreRefused() throws {
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let tiny = try CommandOutput.run(
            Self.afm, ["agent", "--url", "http://127.0.0.1:1", "--model", "m", "--tool-timeout", "0.0004", "Hi"],
            environment: Self.environment(home))
        #expect(tiny.status == 64, "\(tiny.output)")
        #expect(tiny.output.contains("--tool-timeout takes seconds ≥ 0.001"), "\(tiny.output)")
        try FileManager.default.createDirectory(atPath: home + "/afm", withIntermediateDirectories: true)
        try """
            [Agent]
            Model=m
            URL=http://127.0.0.1:1

            [MCP.quick]
            Command=/bin/true
            StartupTimeout=0.0001
            """.write(toFile: home + "/afm/agent.conf", atomically: true, encoding: .utf8)
        let file = try CommandOutput.run(Self.afm, ["agent", "Hi"], environment: Self.environment(home))
        #expect(file.status == 64, "\(file.output)")
        #expect(file.output.contains("agent.conf:7: StartupTimeout takes seconds ≥ 0.001"), "\(file.output)")
    }

    /// `[MCP.<name>]` `Directory` and `Env` reach the server's process: it reports its working directory and the
    /// variable through a tool, and the model reads them.
    @Test func theConfigFileGivesAServerItsDirectoryAndEnvironment() throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"found it"}],"else":[{"tool_call":{"name":"whereami","arguments":"{}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let python = try PythonEnvironment.python()
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let directory = TestPaths.makeTemporaryDirectory("afm-agent-server-cwd")
        try FileManager.default.createDirectory(atPath: home + "/afm", withIntermediateDirectories: true)
        try """
            [Agent]
            Model=m
            URL=\(gateway.url)

            [MCP.where]
            Command=\(python)
            Args=\(PythonEnvironment.mcpTestServer) extras
            Directory=\(directory)
            Env=PYTHONUNBUFFERED=1
            Env=AFM_MCP_TEST_VALUE=set in agent.conf
            StartupTimeout=60
            """.write(toFile: home + "/afm/agent.conf", atomically: true, encoding: .utf8)
        let result = try CommandOutput.run(Self.afm, ["agent", "--json", "Where are you?"], environment: Self.environment(home))
        #expect(result.status == 0, "\(result.output)")
        let events = result.output.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        let output = events.first { $0["type"] == "tool_call_completed" }?["output"]?["text"]?.stringValue ?? ""
        let report = try JSONParser.parse(output)
        #expect(report["cwd"]?.stringValue == MCPCallTests.realPath(directory), "\(output)")
        #expect(report["value"] == "set in agent.conf")
        // The model read the same report.
        let sent = gateway.requests().last?["input"]?.arrayValue?.last
        #expect(sent?["output"]?.stringValue == output)
    }

    /// Every option of `afm agent`'s usage line in `--help` has its entry in the man page, and both say what
    /// `--instructions`/`-f` and `--tool-timeout` do.
    @Test func helpAndTheManPageDocumentEveryAgentOption() throws {
        let help = try CommandOutput.run(Self.afm, ["--help"])
        #expect(help.status == 0)
        let usage = help.output.components(separatedBy: "afm agent ").dropFirst().first?.components(separatedBy: "afm bridge").first ?? ""
        let options = Set(usage.split(whereSeparator: { " []|…\n".contains($0) }).filter { $0.hasPrefix("-") && $0 != "-" }.map(String.init))
        #expect(options.isSuperset(of: ["--instructions", "-f", "--tool-timeout", "--mcp", "--schema", "--max-tool-calls", "--json"]), "\(options)")
        let manual = try String(contentsOfFile: TestPaths.root + "/share/man/afm.1", encoding: .utf8)
        for option in options {
            // groff writes a dash as \-.
            let escaped = option.replacingOccurrences(of: "-", with: #"\-"#)
            #expect(manual.contains(".BI " + escaped) || manual.contains(".B " + escaped) || manual.contains(", " + escaped), "afm.1 lacks \(option)")
        }
        let flat = help.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        #expect(flat.contains("--instructions TEXT is the system text of every step, -f FILE reads them from a file"), "\(help.output)")
        #expect(flat.contains("--tool-timeout limits each tool call, MCP calls included"), "\(help.output)")
        #expect(manual.contains("MCP calls included"))
    }

    /// `--max-tool-calls N` caps a turn's calls: the model that calls whenever it may gets one call, then a step
    /// without tools; `-` reads the prompt from standard input; `--config FILE` names the configuration file.
    @Test func maxToolCallsThePromptFromStandardInputAndAConfigFile() throws {
        let callsWheneverOffered =
            #"[{"if_tools_offered":true,"then":[{"tool_call":{"name":"add","arguments":"{\"a\":1,\"b\":1}"}}],"else":[{"text":"enough"}]}]"#
        let gateway = try ScriptedGateway(models: [("m", callsWheneverOffered)])
        let python = try PythonEnvironment.python()
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        let config = home + "/elsewhere.conf"
        try """
            [Agent]
            URL=\(gateway.url)
            Model=m

            [MCP.calc]
            Command=\(python)
            Args=\(PythonEnvironment.mcpTestServer)
            StartupTimeout=60
            """.write(toFile: config, atomically: true, encoding: .utf8)
        let result = try CommandOutput.run(
            "/bin/sh", ["-c", "printf 'Add one and one, again and again' | '\(Self.afm)' agent --config '\(config)' --max-tool-calls 1 --json -"],
            environment: Self.environment(home))
        #expect(result.status == 0, "\(result.output)")
        let events = result.output.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        #expect(events.filter { $0["type"] == "tool_call_completed" }.count == 1, "\(result.output)")
        #expect(events.last?["response"]?["text"] == "enough")
        let requests = gateway.requests()
        #expect(requests.map(\.offeredTools) == [["add", "refuse", "crash", "grow"], []])
        #expect(requests.first?.userTexts == ["Add one and one, again and again"])
        let missing = try CommandOutput.run(Self.afm, ["agent", "--config", home + "/absent.conf", "Hi"], environment: Self.environment(home))
        #expect(missing.status == 64)
        #expect(missing.output.contains("cannot read the configuration file"), "\(missing.output)")
    }

    /// `[Agent] ToolTimeout` (fractions of a second too) is the call timeout of every server that sets none: the
    /// 20 s call becomes an error output at 0.5 s.
    @Test func theConfigFilesToolTimeoutLimitsServersWithoutTheirOwn() throws {
        let steps = #"[{"if_input_has":"function_call_output","then":[{"text":"gave up waiting"}],"else":[{"tool_call":{"name":"sleep","arguments":"{\"seconds\":20}"}}]}]"#
        let gateway = try ScriptedGateway(models: [("m", steps)])
        let python = try PythonEnvironment.python()
        let home = TestPaths.makeTemporaryDirectory("afm-agent-home")
        try FileManager.default.createDirectory(atPath: home + "/afm", withIntermediateDirectories: true)
        try """
            [Agent]
            Model=m
            URL=\(gateway.url)
            ToolTimeout=0.5

            [MCP.extras]
            Command=\(python)
            Args=\(PythonEnvironment.mcpTestServer) extras
            StartupTimeout=60
            """.write(toFile: home + "/afm/agent.conf", atomically: true, encoding: .utf8)
        let clock = ContinuousClock()
        let start = clock.now
        let result = try CommandOutput.run(Self.afm, ["agent", "--json", "Sleep"], environment: Self.environment(home))
        #expect(clock.now - start < .seconds(18))
        #expect(result.status == 0, "\(result.output)")
        let events = result.output.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        let output = events.first { $0["type"] == "tool_call_completed" }?["output"]
        #expect(output?["is_error"] == true, "\(result.output)")
        #expect(output?["text"]?.stringValue?.contains("did not answer tools/call within 0.5 s") == true, "\(result.output)")
        #expect(events.last?["response"]?["text"] == "gave up waiting")
    }
}
