# SPDX-License-Identifier: Apache-2.0
"""A request shaped like the ones Codex CLI sends (`wire_api = "responses"`), over plain HTTP with no SDK.

The body carries what Codex serializes for every turn (reference/responses-api.md §3, "Codex CLI"): instructions,
`developer` and `user` messages in `input`, a function tool, the freeform `apply_patch` custom tool, an MCP server's
`namespace` tool, the hosted `web_search` tool, `tool_choice:"auto"`, `parallel_tool_calls:false`, `reasoning`,
`store:false`, `stream:true`, `include:["reasoning.encrypted_content"]`, `prompt_cache_key`, `client_metadata` and
`text.verbosity`. Issue 3 says what the gateway must do with each; these tests hold it to that.
"""

from __future__ import annotations

import base64
import copy
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

INSTRUCTIONS = "You are Codex, a coding agent based on GPT-5. You and the user share the same workspace."
DEVELOPER_TEXT = (
    "<permissions instructions>Filesystem sandboxing: workspace-write. "
    "Approvals: on-request.</permissions instructions>"
)
ENVIRONMENT = "<environment_context>\n  <cwd>/home/user/project</cwd>\n  <shell>bash</shell>\n</environment_context>"
PROMPT = "Find the docs for the config loader and fix the typo in README.md."
REASONING_STATE = "scripted hidden reasoning state: never shown to the client in clear"

APPLY_PATCH_GRAMMAR = r"""start: begin_patch hunk+ end_patch
begin_patch: "*** Begin Patch" LF
end_patch: "*** End Patch" LF?
hunk: add_hunk | delete_hunk | update_hunk
add_hunk: "*** Add File: " filename LF add_line+
delete_hunk: "*** Delete File: " filename LF
update_hunk: "*** Update File: " filename LF change_move? change?
filename: /(.+)/
add_line: "+" /(.*)/ LF -> line
change_move: "*** Move to: " filename LF
change: (change_context | change_line)+ eof_line?
change_context: ("@@" | "@@ " /(.+)/) LF
change_line: ("+" | "-" | " ") /(.*)/ LF
eof_line: "*** End of File" LF
%import common.LF
"""

SHELL_TOOL = {
    "type": "function",
    "name": "shell",
    "description": "Runs a shell command and returns its output.",
    "strict": False,
    "parameters": {
        "type": "object",
        # Not alphabetical on purpose: the backend must see this order.
        "properties": {
            "command": {"type": "array", "items": {"type": "string"}, "description": "The command to execute"},
            "workdir": {"type": "string", "description": "The working directory"},
            "timeout_ms": {"type": "number", "description": "The timeout in milliseconds"},
        },
        "required": ["command"],
        "additionalProperties": False,
    },
}
APPLY_PATCH_TOOL = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Use the `apply_patch` tool to edit files. This is a FREEFORM tool: do not wrap the patch in JSON.",
    "format": {"type": "grammar", "syntax": "lark", "definition": APPLY_PATCH_GRAMMAR},
}
MCP_TOOL = {
    "type": "namespace",
    "name": "mcp__docs",
    "description": "Tools from the MCP server `docs`.",
    "tools": [
        {
            "type": "function",
            "name": "search_docs",
            "description": "Searches the project documentation.",
            "strict": False,
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
                "required": ["query"],
                "additionalProperties": False,
            },
        }
    ],
}
WEB_SEARCH_TOOL = {"type": "web_search", "external_web_access": False}

CODEX_BODY = {
    "model": "codex-model",
    "instructions": INSTRUCTIONS,
    "input": [
        {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": DEVELOPER_TEXT}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": ENVIRONMENT}]},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPT}]},
    ],
    "tools": [SHELL_TOOL, APPLY_PATCH_TOOL, MCP_TOOL, WEB_SEARCH_TOOL],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "reasoning": {"effort": "medium", "summary": "auto"},
    "store": False,
    "stream": True,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "019a0b6c-7d1e-7f00-8a2b-3c4d5e6f7a8b",
    "client_metadata": {"x-codex-installation-id": "5b0f3c1e-2a4d-4e6f-9a8b-7c6d5e4f3a2b"},
    "text": {"verbosity": "low"},
}

# Reasoning models: the scripted model declares reasoning, so reasoning.effort is honoured.
REASONING_CAPABILITIES = {
    "streaming": True,
    "tools": True,
    "vision": False,
    "reasoning": True,
    "reasoning_optional": True,
}
SEARCH_ARGUMENTS = '{"query":"config loader","limit":3}'
PATCH = "*** Begin Patch\n*** Update File: README.md\n@@\n-teh config\n+the config\n*** End Patch\n"


def reasoning_model(steps: list[dict]) -> dict:
    return {"capabilities": REASONING_CAPABILITIES, "steps": steps}


ANSWER = [{"text": "Found it: "}, {"text": "docs/config.md."}]
MODELS = {
    # Codex keeps one model for a whole task (and sealed reasoning is bound to it), so the model branches on the
    # turn: the first thinks, says something and calls the MCP tool; once the tool's output is back it answers.
    "codex-model": reasoning_model(
        [
            {
                "if_input_has": "function_call_output",
                "then": ANSWER,
                "else": [
                    {"reasoning_text": "The user wants docs; search them first."},
                    {"reasoning_state": REASONING_STATE},
                    {"text": "Searching the docs."},
                    {
                        "tool_call": {
                            "name": "search_docs",
                            "call_id": "call_mcp_1",
                            "arguments": SEARCH_ARGUMENTS,
                            "chunks": 2,
                        }
                    },
                ],
            }
        ]
    ),
    # Answers at once.
    "codex-answer": reasoning_model(ANSWER),
    # A turn that edits a file with the freeform tool.
    "codex-patch": reasoning_model(
        [
            {
                "tool_call": {
                    "name": "apply_patch",
                    "call_id": "call_patch_1",
                    "arguments": json.dumps({"input": PATCH}),
                    "chunks": 5,
                }
            }
        ]
    ),
}


@dataclass
class SSEAnswer:
    status: int
    headers: list[tuple[str, str]]
    events: list[dict]
    body: str = ""

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    def header_values(self) -> list[str]:
        return [value for _, value in self.headers]


def post_stream(gw, body: dict) -> SSEAnswer:
    """POSTs to /v1/responses and reads Server-Sent Events to the end of the stream, checking the framing."""
    request = urllib.request.Request(
        f"{gw.base_url}/responses",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "Accept": "text/event-stream", "Authorization": "Bearer unused"},
        method="POST",
    )
    try:
        answer = urllib.request.urlopen(request, timeout=30)
    except urllib.error.HTTPError as error:
        return SSEAnswer(error.code, list(error.headers.items()), [], error.read().decode("utf-8", "replace"))
    with answer:
        assert answer.headers.get_content_type() == "text/event-stream"
        events: list[dict] = []
        name, data = None, []
        for raw in answer:
            line = raw.decode("utf-8").rstrip("\r\n")
            if line == "":
                if data:
                    payload = "\n".join(data)
                    assert payload != "[DONE]", "[DONE] is never sent"
                    event = json.loads(payload)
                    assert event["type"] == name, f"event: {name} but data.type {event['type']}"
                    events.append(event)
                name, data = None, []
            elif line.startswith("event:"):
                name = line[len("event:") :].strip()
            elif line.startswith("data:"):
                data.append(line[len("data:") :].strip())
        return SSEAnswer(answer.status, list(answer.headers.items()), events)


def assert_well_formed(answer: SSEAnswer) -> dict:
    """The stream starts with response.created, ends with exactly one response.completed, numbers its events;
    returns the completed response."""
    assert answer.status == 200, (answer.status, answer.body)
    types = answer.types
    assert types[:2] == ["response.created", "response.in_progress"], types
    assert types[-1] == "response.completed", types
    assert types.count("response.completed") == 1
    assert not {"error", "response.failed", "response.incomplete"} & set(types), types
    sequence = [event["sequence_number"] for event in answer.events]
    assert sequence == list(range(sequence[0], sequence[0] + len(sequence))), sequence
    for event in answer.events:
        assert "error" not in event or event["type"] == "error" or not event["error"], event
    return answer.events[-1]["response"]


def assert_usage(response: dict) -> None:
    usage = response["usage"]
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        assert isinstance(usage[key], int), usage
    assert isinstance(usage["input_tokens_details"]["cached_tokens"], int), usage
    assert isinstance(usage["output_tokens_details"]["reasoning_tokens"], int), usage
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]


def codex_turn(gateway) -> tuple:
    """Starts afmd, sends CODEX_BODY, checks the stream's shape; returns (gateway, answer, completed response, the
    generation request the backend got)."""
    gw = gateway(models=MODELS)
    answer = post_stream(gw, CODEX_BODY)
    response = assert_well_formed(answer)
    requests = gw.generate_requests()
    assert len(requests) == 1, requests
    return gw, answer, response, requests[0]


def test_codex_request_streams_to_completion(gateway):
    _, answer, response, sent = codex_turn(gateway)

    # Accepted-and-ignored fields are echoed; nothing is stored.
    assert response["status"] == "completed"
    assert response["model"] == "codex-model"
    assert response["store"] is False
    assert response["prompt_cache_key"] == CODEX_BODY["prompt_cache_key"]
    assert response["parallel_tool_calls"] is False
    assert response["tool_choice"] == "auto"
    assert response["text"]["verbosity"] == "low"
    assert response["reasoning"]["effort"] == "medium"
    assert response["instructions"] == INSTRUCTIONS
    assert_usage(response)

    messages = [item for item in response["output"] if item["type"] == "message"]
    assert [part["text"] for item in messages for part in item["content"]] == ["Searching the docs."]
    # The items streamed are the items completed (Codex keeps them from output_item.done).
    done_items = [event["item"] for event in answer.events if event["type"] == "response.output_item.done"]
    assert done_items == response["output"]

    # Instructions and developer text stay apart from the conversation; the function tool keeps its schema order.
    assert sent["model"] == "codex-model"
    assert sent["stream"] is True
    assert sent["system"][:2] == [INSTRUCTIONS, DEVELOPER_TEXT], sent["system"]
    assert [(item["type"], item["role"]) for item in sent["input"]] == [("message", "user"), ("message", "user")]
    assert [part["text"] for item in sent["input"] for part in item["content"]] == [ENVIRONMENT, PROMPT]
    assert sent["tool_choice"] == {"mode": "auto"}
    assert sent["parallel_tool_calls"] is False
    shell = [tool for tool in sent["tools"] if tool["name"] == "shell"]
    assert len(shell) == 1, sent["tools"]
    assert list(shell[0]["parameters"]["properties"]) == ["command", "workdir", "timeout_ms"]
    assert shell[0]["namespace"] is None


def test_codex_hosted_web_search_is_dropped_with_a_warning(gateway):
    _, answer, _, sent = codex_turn(gateway)
    assert "web_search" not in [tool["name"] for tool in sent["tools"]]
    assert any("web_search" in value for value in answer.header_values()), answer.headers


def test_codex_tools_reach_the_backend_expanded(gateway):
    _, _, response, sent = codex_turn(gateway)
    tools = {tool["name"]: tool for tool in sent["tools"]}
    assert list(tools) == ["shell", "apply_patch", "search_docs"], "web_search dropped, the namespace expanded"
    # The MCP namespace's member carries its namespace, and so does the model's call of it.
    assert tools["search_docs"]["namespace"] == "mcp__docs"
    assert list(tools["search_docs"]["parameters"]["properties"]) == ["query", "limit"]
    # The freeform tool is offered as a function with one string input.
    patch_parameters = tools["apply_patch"]["parameters"]
    assert patch_parameters["type"] == "object"
    assert list(patch_parameters["properties"]) == ["input"]
    assert patch_parameters["properties"]["input"]["type"] == "string"
    assert tools["apply_patch"]["namespace"] is None

    (call,) = [item for item in response["output"] if item["type"] == "function_call"]
    assert call["name"] == "search_docs"
    assert call["namespace"] == "mcp__docs"
    assert call["call_id"] == "call_mcp_1"
    assert json.loads(call["arguments"]) == {"query": "config loader", "limit": 3}
    assert call["id"] != call["call_id"]


def test_codex_reasoning_is_passed_on_and_sealed(gateway):
    _, answer, response, sent = codex_turn(gateway)
    assert sent["reasoning_effort"] == "medium"
    assert response["usage"]["output_tokens_details"]["reasoning_tokens"] >= 1

    output = response["output"]
    assert [item["type"] for item in output] == ["reasoning", "message", "function_call"], output
    reasoning = output[0]
    assert reasoning["summary"] == []
    sealed = reasoning["encrypted_content"]
    assert isinstance(sealed, str) and sealed
    assert REASONING_STATE not in sealed
    assert base64.b64encode(REASONING_STATE.encode()).decode() not in sealed, "plaintext is never in encrypted_content"
    (done,) = [
        event["item"]
        for event in answer.events
        if event["type"] == "response.output_item.done" and event["item"]["type"] == "reasoning"
    ]
    assert done["encrypted_content"] == sealed


def test_codex_follow_up_turn_replays_reasoning_and_the_mcp_call(gateway):
    gw = gateway(models=MODELS)
    first = assert_well_formed(post_stream(gw, CODEX_BODY))

    # Codex's next turn: the same body with the model's items and the tool's output appended.
    follow_up = copy.deepcopy(CODEX_BODY)
    follow_up["input"] += first["output"] + [
        {"type": "function_call_output", "call_id": "call_mcp_1", "output": "docs/config.md: the config loader"}
    ]
    answer = post_stream(gw, follow_up)
    response = assert_well_formed(answer)
    assert [item["type"] for item in response["output"]] == ["message"]
    assert response["output"][0]["content"][0]["text"] == "Found it: docs/config.md."

    sent = gw.generate_requests()[-1]
    assert sent["model"] == "codex-model"
    types = [item["type"] for item in sent["input"]]
    assert types == ["message", "message", "reasoning", "message", "function_call", "function_call_output"], types
    reasoning = sent["input"][2]
    assert base64.b64decode(reasoning["state_base64"]).decode() == REASONING_STATE, "the sealed state is opened"
    assert sent["input"][3]["role"] == "assistant"
    call = sent["input"][4]
    assert (call["call_id"], call["name"], call["namespace"]) == ("call_mcp_1", "search_docs", "mcp__docs")
    assert call["arguments"] == SEARCH_ARGUMENTS
    assert sent["input"][5] == {
        "type": "function_call_output",
        "call_id": "call_mcp_1",
        "output": "docs/config.md: the config loader",
    }


def test_codex_apply_patch_comes_back_as_a_custom_tool_call(gateway):
    gw = gateway(models=MODELS)
    body = copy.deepcopy(CODEX_BODY)
    body["model"] = "codex-patch"
    answer = post_stream(gw, body)
    response = assert_well_formed(answer)

    (item,) = response["output"]
    assert item["type"] == "custom_tool_call"
    assert item["name"] == "apply_patch"
    assert item["call_id"] == "call_patch_1"
    assert item["input"] == PATCH
    assert item["id"] != item["call_id"]
    deltas = [event for event in answer.events if event["type"] == "response.custom_tool_call_input.delta"]
    assert deltas and "".join(event["delta"] for event in deltas) == PATCH
    assert all(event["item_id"] == item["id"] for event in deltas)
    (done,) = [event for event in answer.events if event["type"] == "response.custom_tool_call_input.done"]
    assert done["input"] == PATCH
    assert "response.function_call_arguments.delta" not in answer.types


def test_codex_replays_custom_tool_call_items(gateway):
    """Codex replays custom_tool_call / custom_tool_call_output items on every later turn (reference §3)."""
    gw = gateway(models=MODELS)
    body = copy.deepcopy(CODEX_BODY)
    body["model"] = "codex-answer"
    body["input"] += [
        {
            "type": "custom_tool_call",
            "id": "ctc_1",
            "status": "completed",
            "call_id": "call_patch_1",
            "name": "apply_patch",
            "input": PATCH,
        },
        {"type": "custom_tool_call_output", "call_id": "call_patch_1", "output": "Success. Updated: M README.md"},
    ]
    response = assert_well_formed(post_stream(gw, body))
    assert response["output"][0]["content"][0]["text"] == "Found it: docs/config.md."

    sent = gw.generate_requests()[-1]
    types = [item["type"] for item in sent["input"]]
    assert types[-2:] == ["function_call", "function_call_output"], types
    call, output = sent["input"][-2:]
    assert call["name"] == "apply_patch" and call["call_id"] == "call_patch_1"
    assert json.loads(call["arguments"]) == {"input": PATCH}
    assert output["call_id"] == "call_patch_1" and output["output"] == "Success. Updated: M README.md"
