# SPDX-License-Identifier: Apache-2.0
"""The bridge (docs/bridge.md) driven by Python hosts against a real afmd serving the scripted backend: over stdio
(``afm bridge`` as a subprocess) and over the C ABI (``libafm-bridge.so`` through ctypes), the same scenario for
both: an external ``roll_dice`` tool round trip, a schema turn, a cancel, the history, protocol errors with the
bridge still answering afterwards. Also: NPCs with the world's facts per turn, closing with active runs, and a
host killed mid-run (the bridge and its MCP server end)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from bridge_host import CtypesHost, StdioHost, afm_binary, bridge_library, load_library, wait_until
from conftest import ROOT, Gateway, bin_dir

ROLL = {"type": "object", "properties": {"sides": {"type": "integer"}}, "required": ["sides"]}
ROLL_TOOL = {"name": "roll_dice", "description": "Rolls a die with the given number of sides.", "parameters": ROLL, "external": True}
VERDICT = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "verdict": {"type": "string", "enum": ["lucky", "unlucky"]}},
    "required": ["reasoning", "verdict"],
    "additionalProperties": False,
}

# The scripted models: "dice" calls roll_dice until an output comes back, then answers; "verdict" answers the schema
# turn with JSON (keys deliberately out of the schema's order); "stall" never answers until cancelled.
MODELS = {
    "dice": [
        {
            "if_input_has": "function_call_output",
            "then": [{"text": "You rolled "}, {"text": "a four."}],
            "else": [{"tool_call": {"name": "roll_dice", "arguments": "{\"sides\":6}", "chunks": 3}}],
        }
    ],
    "verdict": {
        "capabilities": {"streaming": True, "tools": True, "vision": False, "reasoning": False, "structured_output": True},
        "steps": [{"json": {"text": "{\"verdict\":\"lucky\",\"reasoning\":\"four beats three\"}", "chunks": 6}}],
    },
    "stall": [{"text": "Thinking"}, {"hang": True}],
}


@pytest.fixture(params=["stdio", "ctypes"])
def host_factory(request, tmp_path: Path):
    """Makes hosts of one kind for a test (``afm bridge`` subprocesses, or handles of libafm-bridge.so) and closes
    them afterwards: a stdio bridge must exit 0 once its stdin closes, a handle must close with AFM_BRIDGE_OK."""
    hosts: list[Any] = []
    library = load_library(bridge_library(bin_dir())) if request.param == "ctypes" else None

    def make(url: str, model: str) -> StdioHost | CtypesHost:
        if library is not None:
            host: StdioHost | CtypesHost = CtypesHost(library, url, model)
        else:
            host = StdioHost(afm_binary(bin_dir()), url, model, tmp_path / f"bridge{len(hosts)}.log")
        hosts.append(host)
        return host

    yield make
    statuses = [host.close() for host in hosts]
    assert statuses == [0] * len(hosts)


def expect_error(answer: dict[str, Any], code: int) -> dict[str, Any]:
    assert "error" in answer, f"expected error {code}, got {answer}"
    assert answer["error"]["code"] == code, answer
    return answer["error"]


def test_one_scenario_over_stdio_and_over_the_c_abi(gateway, host_factory) -> None:
    gw: Gateway = gateway(models=MODELS)
    host = host_factory(gw.origin, "dice")

    hello = host.call("initialize", {"protocol_version": "2026-12-01", "client_info": {"name": "pytest", "version": "1"}})
    assert hello["protocol_version"] == "2026-12-01"
    assert hello["server_info"]["name"] == "afm-bridge"
    assert "run.submitToolOutput" in hello["methods"]
    # An unknown revision is answered with the bridge's own (the host decides whether it can go on).
    assert host.call("initialize", {"protocol_version": "1999-01-01"})["protocol_version"] == "2026-12-01"

    agent = host.call("agent.create", {"instructions": "You are a dice game.", "tools": [ROLL_TOOL]})["agent_id"]

    # 1. The external tool: the model calls roll_dice, the host answers, the model's text streams back.
    run = host.call("agent.run", {"agent_id": agent, "prompt": "Roll a six-sided die."})["run_id"]
    call = host.wait_event(run, "tool_call_requested")
    assert call["name"] == "roll_dice" and json.loads(call["arguments"]) == {"sides": 6}
    assert host.call("run.submitToolOutput", {"run_id": run, "call_id": call["call_id"], "output": "4"}) == {"accepted": True}
    # A second answer to the same call is not accepted: the call is no longer waiting.
    assert host.call("run.submitToolOutput", {"run_id": run, "call_id": call["call_id"], "output": "5"}) == {"accepted": False}
    end = host.wait_end(run)
    assert end["type"] == "completed", end
    assert end["response"]["text"] == "You rolled a four."
    assert [c["output"]["text"] for c in end["response"]["tool_calls"]] == ["4"]
    events = host.events(run)
    assert [e["type"] for e in events][:2] == ["tool_call_requested", "tool_call_completed"]
    assert "".join(e["delta"] for e in events if e["type"] == "text") == "You rolled a four."
    assert [n["params"]["seq"] for n in host.notifications if n["params"]["run_id"] == run] == list(range(len(events)))
    # The model read the host's output as the call's output.
    second = gw.generate_requests()[-1]
    outputs = [item for item in second["input"] if item.get("type") == "function_call_output"]
    assert [(o["call_id"], o["output"]) for o in outputs] == [(call["call_id"], "4")]

    # 2. A schema turn: sent as text.format json_schema; the answer streams as partial JSON and comes back parsed,
    # its keys in the schema's order (the model wrote them the other way round).
    judge = host.call("agent.create", {"model": "verdict"})["agent_id"]
    run = host.call("agent.run", {"agent_id": judge, "prompt": "Lucky?", "schema": {"name": "verdict", "schema": VERDICT}})["run_id"]
    end = host.wait_end(run)
    assert end["type"] == "completed", end
    assert list(end["response"]["json"].items()) == [("reasoning", "four beats three"), ("verdict", "lucky")]
    kinds = [e["type"] for e in host.events(run)]
    assert kinds[-1] == "completed" and set(kinds[:-1]) == {"partial"} and len(kinds) > 2
    assert gw.generate_requests()[-1]["output_format"]["type"] == "json_schema"
    assert gw.generate_requests()[-1]["output_format"]["name"] == "verdict"

    # 3. Cancel: the run ends failed/cancelled and the history is as it was.
    stall = host.call("agent.create", {"model": "stall"})["agent_id"]
    run = host.call("agent.run", {"agent_id": stall, "prompt": "Take your time."})["run_id"]
    host.wait_event(run, "text")
    assert host.call("run.cancel", {"run_id": run}) == {"cancelled": True}
    end = host.wait_end(run)
    assert end["type"] == "failed" and end["error"]["code"] == "cancelled"
    assert host.call("run.cancel", {"run_id": run}) == {"cancelled": False}
    assert host.call("agent.history", {"agent_id": stall}) == {"items": [], "turns": 0}

    # 4. The history: the complete turns, prompt first, then the call, its output and the answer.
    history = host.call("agent.history", {"agent_id": agent})
    first_turn = [item["type"] for item in history["items"][:4]]
    assert first_turn == ["message", "function_call", "function_call_output", "message"]
    assert history["items"][2]["output"] == "4"
    assert host.call("agent.reset", {"agent_id": agent}) == {}
    assert host.call("agent.history", {"agent_id": agent})["turns"] == 0

    # 5. Protocol errors, each answered, and the bridge still answers afterwards.
    host.send_raw(b"{not json")
    assert expect_error(host.response(None), -32700)["message"].startswith("the message is not valid JSON")
    host.send_raw(b"Content-Length: 52")
    assert "Content-Length" in expect_error(host.response(None), -32700)["message"]
    host.send_raw(json.dumps({"jsonrpc": "2.0", "id": 41, "method": 7}).encode())
    expect_error(host.response(41), -32600)
    host.send_raw(json.dumps({"jsonrpc": "1.0", "id": 42, "method": "ping"}).encode())
    expect_error(host.response(42), -32600)
    host.send_raw(b"[1,2]")
    expect_error(host.response(None), -32600)
    expect_error(host.request("agent.fly"), -32601)
    error = expect_error(host.request("agent.run", {"agent_id": agent}), -32602)
    assert error["data"]["field"] == "prompt"
    error = expect_error(host.request("agent.run", {"agent_id": "agent-99", "prompt": "x"}), -32602)
    assert error["data"]["field"] == "agent_id"
    error = expect_error(host.request("agent.create", {"tools": [{"name": "x", "external": True, "parameters": {"type": "array"}}]}), -32602)
    assert error["data"]["field"] == "tools[0].parameters"
    error = expect_error(host.request("agent.create", {"policy": {"max_steps": 0}}), -32602)
    assert error["data"]["field"] == "policy.max_steps"
    error = expect_error(host.request("run.cancel", {"run_id": "run-1000"}), -32602)
    assert error["data"]["field"] == "run_id"
    # A notification is never answered, not even with an error.
    host.send_raw(json.dumps({"jsonrpc": "2.0", "method": "agent.fly"}).encode())
    assert host.call("ping") == {}
    assert not [m for m in host.messages if m.get("error", {}).get("message", "").startswith("no method \"agent.fly\"") and m.get("id") is None]
    assert host.call("agent.history", {"agent_id": agent})["turns"] == 0

    # A run that fails reports the AgentError's code: an unknown model is model_unavailable.
    lost = host.call("agent.create", {"model": "no-such-model"})["agent_id"]
    run = host.call("agent.run", {"agent_id": lost, "prompt": "Hello?"})["run_id"]
    end = host.wait_end(run)
    assert end["type"] == "failed" and end["error"]["code"] == "model_unavailable", end

    if isinstance(host, CtypesHost):
        # Every callback ran on the handle's one delivery thread, never on this test's thread.
        assert len(host.callback_threads) == 1
        assert host.callback_threads.pop() != threading.get_ident()


def test_shutdown_cancels_runs_answers_then_refuses_and_the_stdio_bridge_exits_0(gateway, host_factory) -> None:
    gw: Gateway = gateway(models=MODELS)
    host = host_factory(gw.origin, "stall")
    agent = host.call("agent.create", {})["agent_id"]
    run = host.call("agent.run", {"agent_id": agent, "prompt": "Take your time."})["run_id"]
    host.wait_event(run, "text")
    shutdown = host.send("shutdown", {})
    assert host.response(shutdown) == {"jsonrpc": "2.0", "id": shutdown, "result": {}}
    # The run was cancelled, and its last event came before the answer to shutdown.
    end = host.wait_end(run, timeout=0)
    assert end["type"] == "failed" and end["error"]["code"] == "cancelled", end
    answer_index = next(i for i, m in enumerate(host.messages) if m.get("id") == shutdown)
    assert any(m.get("method") == "run.event" and m["params"]["event"] is end for m in host.messages[:answer_index])
    if isinstance(host, StdioHost):
        # afm bridge ends by itself once it has answered, with stdin still open.
        assert host.process.wait(timeout=30) == 0, host.log()
    else:
        # The handle stays open until closed: later requests are refused, shutdown itself still answers.
        error = expect_error(host.request("ping", {}), -32000)
        assert error["data"]["code"] == "shut_down", error
        assert host.call("shutdown", {}) == {}


def test_npcs_see_the_world_as_it_is_now_and_act_through_the_host(gateway, tmp_path: Path) -> None:
    """npc.say: the persona and the world's facts of the moment are in each turn's system text, never in the
    transcript; an NPC action is an external tool the host runs; memory keeps the last turns only."""
    gw: Gateway = gateway(
        models={
            "npc": [
                {
                    "if_input_has": "function_call_output",
                    "then": [{"text": "The door is open now."}],
                    "else": [
                        {
                            "if_tools_offered": True,
                            "then": [{"tool_call": {"name": "open_door", "arguments": "{\"door\":\"north\"}"}}],
                            "else": [{"text": "Evening, traveller."}],
                        }
                    ],
                }
            ]
        }
    )
    host = StdioHost(afm_binary(bin_dir()), gw.origin, "npc", tmp_path / "bridge.log")
    try:
        persona = {"name": "Brom", "traits": ["gruff", "honest"], "voice": "short sentences", "goals": ["guard the gate"]}
        door = {"name": "open_door", "description": "Opens a door.", "parameters": {"type": "object", "properties": {"door": {"type": "string"}}}}
        npc = host.call("npc.create", {"persona": persona, "actions": [door], "memory_turns": 1})["npc_id"]
        talker = host.call("npc.create", {"persona": {"name": "Ysolde"}})["npc_id"]
        assert (npc, talker) == ("npc-1", "npc-2")
        assert host.call("world.set", {"facts": {"time": "dusk", "gate": "closed"}}) == {"revision": 1}

        run = host.call("npc.say", {"npc_id": npc, "speaker": "The player", "text": "Open the north door, please."})["run_id"]
        call = host.wait_event(run, "tool_call_requested")
        assert call["name"] == "open_door"
        # The game runs the action, then changes its world.
        assert host.call("world.patch", {"patch": {"gate": "open", "time": None}}) == {"revision": 2}
        assert host.call("run.submitToolOutput", {"run_id": run, "call_id": call["call_id"], "output": {"text": "opened", "is_error": False}})["accepted"]
        end = host.wait_end(run)
        assert end["type"] == "completed" and end["response"]["text"] == "The door is open now."

        run = host.call("npc.say", {"npc_id": talker, "text": "Hello."})["run_id"]
        assert host.wait_end(run)["response"]["text"] == "Evening, traveller."
        assert host.call("world.get") == {"facts": {"gate": "open"}, "revision": 2}

        requests = gw.generate_requests()
        first, after_action, talk = requests[0], requests[1], requests[2]
        assert "You are Brom" in first["system"][0] and "gruff, honest" in first["system"][0]
        # Each step sees the world as it was when the turn started (revision 1), in the system text only.
        assert '{"time":"dusk","gate":"closed"}' in first["system"][0]
        assert '{"time":"dusk","gate":"closed"}' in after_action["system"][0]
        assert '{"gate":"open"}' in talk["system"][0] and "You are Ysolde" in talk["system"][0]
        transcript = json.dumps(host.call("agent.history", {"agent_id": npc})["items"])
        assert "dusk" not in transcript and "gate" not in transcript
        assert "The player says: Open the north door, please." in transcript

        # memory_turns 1: a second turn replaces the first in the NPC's memory.
        # (The remembered turn has the action's output in it, so the scripted model answers at once.)
        run = host.call("npc.say", {"npc_id": npc, "text": "Thanks."})["run_id"]
        assert host.wait_end(run)["type"] == "completed"
        assert "north door" in json.dumps(gw.generate_requests()[-1]["input"])
        history = host.call("agent.history", {"agent_id": npc})
        assert history["turns"] == 1 and "Thanks." in json.dumps(history["items"]) and "north door" not in json.dumps(history["items"])

        # Game-layer errors name the field.
        error = expect_error(host.request("npc.decide", {"npc_id": npc, "options": []}), -32602)
        assert error["data"]["field"] == "options"
        error = expect_error(host.request("npc.decide", {"npc_id": npc, "options": ["a", "a"]}), -32602)
        assert "repeats" in error["message"]
        agent = host.call("agent.create", {})["agent_id"]
        error = expect_error(host.request("npc.say", {"npc_id": agent, "text": "x"}), -32602)
        assert error["data"]["field"] == "npc_id"
        error = expect_error(host.request("npc.create", {"persona": {"name": "X", "mood": "odd"}}), -32602)
        assert error["data"]["field"] == "persona.mood"
    finally:
        assert host.close() == 0


MCP_SERVER = ROOT / "Tests" / "Fixtures" / "mcp" / "test_server.py"


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (from /proc)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(child) for child in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_mcp_servers_serve_tools_and_fail_with_an_agent_error(gateway, tmp_path: Path) -> None:
    gw: Gateway = gateway(
        models={
            "calc": [
                {
                    "if_input_has": "function_call_output",
                    "then": [{"text": "The sum is five."}],
                    "else": [{"tool_call": {"name": "add", "arguments": "{\"a\":2,\"b\":3}"}}],
                }
            ]
        }
    )
    host = StdioHost(afm_binary(bin_dir()), gw.origin, "calc", tmp_path / "bridge.log")
    try:
        # Python's mcp package takes seconds to import on a loaded machine: a generous start-up time.
        server = {"name": "calc", "command": sys.executable, "args": [str(MCP_SERVER)], "startup_timeout_ms": 60000}
        agent = host.call("agent.create", {"mcp_servers": [server]})["agent_id"]
        pids = children(host.process.pid)
        assert len(pids) == 1 and alive(pids[0])
        run = host.call("agent.run", {"agent_id": agent, "prompt": "Add 2 and 3."})["run_id"]
        end = host.wait_end(run)
        assert end["type"] == "completed", end
        assert [(c["name"], c["output"]["text"], c["is_external"]) for c in end["response"]["tool_calls"]] == [("add", "5", False)]
        assert "tool_call_started" in [e["type"] for e in host.events(run)]
        # agent.close stops the server.
        assert host.call("agent.close", {"agent_id": agent}) == {}
        assert wait_until(lambda: not alive(pids[0]), timeout=10)
        error = expect_error(host.request("agent.run", {"agent_id": agent, "prompt": "again"}), -32602)
        assert error["data"]["field"] == "agent_id"

        # A server that cannot start: agent.create answers the AgentError tool_failed (−32008, data.code).
        broken = {"name": "broken", "command": str(tmp_path / "no-such-server")}
        error = expect_error(host.request("agent.create", {"mcp_servers": [broken]}), -32008)
        assert error["data"]["code"] == "tool_failed"
        error = expect_error(host.request("agent.create", {"mcp_servers": [{"name": "x"}]}), -32602)
        assert error["data"]["field"] == "mcp_servers[0].command"
    finally:
        assert host.close() == 0, host.log()


HOST_SCRIPT = """
import json, subprocess, sys
afm, url, server = sys.argv[1], sys.argv[2], sys.argv[3]
bridge = subprocess.Popen([afm, "bridge", "--url", url, "--model", "stall"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def send(message):
    bridge.stdin.write((json.dumps(message) + "\\n").encode())
    bridge.stdin.flush()
def until(check):
    for line in bridge.stdout:
        message = json.loads(line)
        if check(message):
            return message
mcp = {"name": "calc", "command": sys.executable, "args": [server], "startup_timeout_ms": 60000}
send({"jsonrpc": "2.0", "id": 1, "method": "agent.create", "params": {"mcp_servers": [mcp]}})
until(lambda m: m.get("id") == 1)
send({"jsonrpc": "2.0", "id": 2, "method": "agent.run", "params": {"agent_id": "agent-1", "prompt": "Wait."}})
until(lambda m: m.get("method") == "run.event" and m["params"]["event"]["type"] == "text")
print(json.dumps({"bridge": bridge.pid}), flush=True)
sys.stdin.read()
"""


def test_killing_the_host_mid_run_ends_the_bridge_and_its_mcp_servers(gateway, tmp_path: Path) -> None:
    gw: Gateway = gateway(models={"stall": MODELS["stall"]})
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT, encoding="utf-8")
    libc = __import__("ctypes").CDLL(None, use_errno=True)
    # This test becomes the subreaper of what the killed host leaves, so it can see them end and reap them.
    PR_SET_CHILD_SUBREAPER = 36
    assert libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        host = subprocess.Popen(
            [sys.executable, str(script), str(afm_binary(bin_dir())), gw.origin, str(MCP_SERVER)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        )
        assert host.stdout is not None
        line = host.stdout.readline()
        assert line, "the host did not get its run going"
        bridge = json.loads(line)["bridge"]
        servers = children(bridge)
        assert len(servers) == 1 and alive(servers[0])
        assert "test_server.py" in Path(f"/proc/{servers[0]}/cmdline").read_text()

        host.send_signal(signal.SIGKILL)
        host.wait()
        # The bridge sees its stdin end: it cancels the run, stops the MCP server and exits 0.
        statuses: dict[int, int] = {}

        def reaped() -> bool:
            for pid in (bridge, *servers):
                if pid in statuses:
                    continue
                try:
                    done, status = os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    # Not ours: reaped by its own parent (the bridge reaps its MCP server).
                    if not alive(pid):
                        statuses[pid] = -1
                    continue
                if done == pid:
                    statuses[pid] = status
            return len(statuses) == 1 + len(servers)

        assert wait_until(reaped, timeout=30), f"still running: {[p for p in (bridge, *servers) if alive(p)]}"
        assert os.waitstatus_to_exitcode(statuses[bridge]) == 0
        assert not any(alive(pid) for pid in (bridge, *servers))
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


STRUCTURED = {"streaming": True, "tools": True, "vision": False, "reasoning": False, "structured_output": True}


def test_npc_decisions_are_schema_turns_with_reasoning_before_one_of_the_options(gateway, tmp_path: Path) -> None:
    decided = '{"reasoning":"It is late and the gate must stay shut.","choice":"ask who it is"}'
    gw: Gateway = gateway(
        models={
            "judge": {"capabilities": STRUCTURED, "steps": [{"json": {"text": decided, "chunks": 5}}]},
            "rogue": {"capabilities": STRUCTURED, "steps": [{"json": {"text": '{"reasoning":"Fire!","choice":"burn it"}'}}]},
        }
    )
    host = StdioHost(afm_binary(bin_dir()), gw.origin, "judge", tmp_path / "bridge.log")
    try:
        options = ["open the gate", "ask who it is", "ignore it"]
        npc = host.call("npc.create", {"persona": {"name": "Brom"}})["npc_id"]
        run = host.call("npc.decide", {"npc_id": npc, "situation": "A stranger knocks at night.", "options": options})["run_id"]
        end = host.wait_end(run)
        assert end["type"] == "completed", end
        assert end["decision"] == {"reasoning": "It is late and the gate must stay shut.", "choice": "ask who it is"}
        assert list(end["response"]["json"]) == ["reasoning", "choice"]
        assert any(e["type"] == "partial" for e in host.events(run))
        request = gw.generate_requests()[-1]
        schema = request["output_format"]["schema"]
        assert request["output_format"]["type"] == "json_schema"
        assert list(schema["properties"]) == ["reasoning", "choice"]
        assert schema["properties"]["choice"]["enum"] == options
        assert request["tools"] == []
        prompt = json.dumps(host.call("agent.history", {"agent_id": npc})["items"][0])
        assert "A stranger knocks at night." in prompt and all(option in prompt for option in options)

        # A model that chooses something else never completes: the gateway's check (or the bridge's) fails it.
        rogue = host.call("npc.create", {"persona": {"name": "Vex"}, "model": "rogue"})["npc_id"]
        run = host.call("npc.decide", {"npc_id": rogue, "options": options})["run_id"]
        end = host.wait_end(run)
        assert end["type"] == "failed" and end["error"]["code"] == "invalid_schema", end
        # A failed turn rolls back (agents.md §1.7): the rogue NPC remembers nothing of it.
        assert host.call("agent.history", {"agent_id": rogue}) == {"items": [], "turns": 0}
    finally:
        assert host.close() == 0
