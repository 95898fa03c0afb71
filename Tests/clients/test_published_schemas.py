# SPDX-License-Identifier: Apache-2.0
"""Every Responses body and stream event validates against the pinned published schemas: OpenAI's OpenAPI document
and the Open Responses specification (issue 15, "Published schemas hold"). Chat Completions and Messages answers
are validated in their own client tests."""

from __future__ import annotations

import json
import urllib.request

import pytest

from schemas import check, check_response_event, check_response_object

TOOL = {
    "type": "function",
    "name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
SCRIPTS = {
    "text": [{"text": "Hello"}, {"text": ", world"}],
    "tool": [{"text": "Checking."}, {"tool_call": {"name": "get_weather", "call_id": "call_1", "arguments": "{\"city\":\"Paris\"}", "chunks": 2}}, {"finish": "tool_calls"}],
    "capped": [{"text": "a"}, {"finish": "length"}],
    "failed": [{"text": "partial"}, {"error": {"code": "internal", "message": "exploded"}}],
}


def post(gw, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        gw.origin + "/v1/responses", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def events_of(raw: bytes) -> list[dict]:
    return [json.loads(line[6:]) for line in raw.decode().split("\n") if line.startswith("data: ")]


@pytest.mark.parametrize("case", sorted(SCRIPTS))
def test_responses_answers_match_both_specifications(gateway, case):
    gw = gateway(models={case: SCRIPTS[case]})
    body = {"model": case, "input": "hi", "tools": [TOOL], "metadata": {"k": "v"}}
    status, raw = post(gw, body)
    if case == "failed":
        assert status == 500
        check("openai", "ErrorResponse", json.loads(raw))
    else:
        assert status == 200
        check_response_object(json.loads(raw))
    status, raw = post(gw, {**body, "stream": True})
    assert status == 200
    events = events_of(raw)
    assert events
    for event in events:
        check_response_event(event)
