# SPDX-License-Identifier: Apache-2.0
"""The anthropic SDK against a real afmd's Messages dialect (issue 15): the scripted backend for exact answers, the
real local model for real ones. Every body and event is validated against the schema derived from the pinned SDK's
types (Tests/schemas)."""

from __future__ import annotations

import json
import urllib.request

import anthropic
import pytest

from conftest import STRUCTURED_CAPABILITIES
from schemas import check, check_anthropic_event

WEATHER = {
    "name": "get_weather",
    "description": "Current weather for a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
CALL_STEPS = [
    {"text": "Let me check."},
    {"tool_call": {"name": "get_weather", "call_id": "toolu_w1", "arguments": json.dumps({"city": "Paris"}), "chunks": 3}},
    {"finish": "tool_calls"},
]


def client_for(gw) -> anthropic.Anthropic:
    # The SDK appends /v1/messages to the base URL: the gateway's root, not /v1.
    return anthropic.Anthropic(base_url=gw.origin, api_key="placeholder", timeout=60, max_retries=0)


def raw_post(gw, path: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        gw.origin + path, data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01", "x-api-key": "placeholder"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def events_of(raw: bytes) -> list[tuple[str, dict]]:
    events, name = [], None
    for line in raw.decode().split("\n"):
        if line.startswith("event: "):
            name = line[7:]
        elif line.startswith("data: "):
            events.append((name, json.loads(line[6:])))
    return events


def test_create(gateway):
    gw = gateway(models={"m": [{"text": "Hello"}, {"text": ", world"}]})
    message = client_for(gw).messages.create(
        model="m", max_tokens=64, system="Be brief.", messages=[{"role": "user", "content": "hi"}])
    assert message.content[0].text == "Hello, world"
    assert message.stop_reason == "end_turn"
    assert message.usage.output_tokens == 2
    status, raw = raw_post(gw, "/v1/messages", {"model": "m", "max_tokens": 64, "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200
    check("anthropic", "Message", json.loads(raw))


def test_stream_get_final_message(gateway):
    gw = gateway(models={"m": [{"text": "Hel"}, {"text": "lo"}]})
    with client_for(gw).messages.stream(model="m", max_tokens=64, messages=[{"role": "user", "content": "hi"}]) as stream:
        texts = list(stream.text_stream)
        final = stream.get_final_message()
    assert "".join(texts) == "Hello"
    assert final.content[0].text == "Hello" and final.stop_reason == "end_turn"
    status, raw = raw_post(gw, "/v1/messages", {"model": "m", "max_tokens": 64, "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    for name, data in events_of(raw):
        check_anthropic_event(name, data)


def test_tool_round_trip(gateway):
    gw = gateway(models={"m": [{"if_input_has": "function_call_output", "then": [{"text": "Sunny."}], "else": CALL_STEPS}]})
    client = client_for(gw)
    messages = [{"role": "user", "content": "weather in Paris?"}]
    with client.messages.stream(model="m", max_tokens=64, tools=[WEATHER], messages=messages) as stream:
        first = stream.get_final_message()
    assert first.stop_reason == "tool_use"
    use = next(block for block in first.content if block.type == "tool_use")
    assert (use.id, use.name, use.input) == ("toolu_w1", "get_weather", {"city": "Paris"})
    messages += [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "sunny"}]},
    ]
    second = client.messages.create(model="m", max_tokens=64, tools=[WEATHER], messages=messages)
    assert second.content[0].text == "Sunny."
    status, raw = raw_post(gw, "/v1/messages", {"model": "m", "max_tokens": 64, "tools": [WEATHER], "stream": True, "messages": messages[:1]})
    for name, data in events_of(raw):
        check_anthropic_event(name, data)
    status, raw = raw_post(gw, "/v1/messages", {"model": "m", "max_tokens": 64, "tools": [WEATHER], "messages": messages[:1]})
    check("anthropic", "Message", json.loads(raw))


def test_count_tokens(gateway):
    gw = gateway(models={"m": [{"text": "x"}]})
    counted = client_for(gw).messages.count_tokens(model="m", messages=[{"role": "user", "content": "hello there"}])
    assert counted.input_tokens > 0
    status, raw = raw_post(gw, "/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    check("anthropic", "MessageTokensCount", json.loads(raw))
    assert gw.generate_requests() == []


def test_errors_are_anthropic_errors(gateway):
    gw = gateway(models={"m": [{"text": "x"}]})
    with pytest.raises(anthropic.BadRequestError) as caught:
        client_for(gw).messages.create(model="m", max_tokens=5, messages=[{"role": "system", "content": "x"}])
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        client_for(gw).messages.create(model="nope", max_tokens=5, messages=[{"role": "user", "content": "x"}])
    status, raw = raw_post(gw, "/v1/messages", {"model": "m", "messages": [{"role": "user", "content": "x"}]})
    assert status == 400
    check("anthropic", "ErrorResponse", json.loads(raw))


def test_models_list_serves_anthropic_clients(gateway):
    gw = gateway(models={"m": [{"text": "x"}]})
    models = client_for(gw).models.list()
    assert "m" in [model.id for model in models]
    request = urllib.request.Request(gw.origin + "/v1/models", headers={"anthropic-version": "2023-06-01"})
    with urllib.request.urlopen(request, timeout=10) as answer:
        for entry in json.load(answer)["data"]:
            check("anthropic", "ModelInfo", entry)


def test_local_model_answers_through_messages(gateway):
    gw = gateway(local=True)
    client = client_for(gw)
    message = client.messages.create(
        model="on-device", max_tokens=24, messages=[{"role": "user", "content": "What is the capital of France?"}])
    assert message.content[0].text.strip()
    assert message.stop_reason in ("end_turn", "max_tokens")
    with client.messages.stream(model="on-device", max_tokens=16, messages=[{"role": "user", "content": "Say hello."}]) as stream:
        final = stream.get_final_message()
    assert final.content and final.usage.output_tokens > 0
    status, raw = raw_post(
        gw, "/v1/messages", {"model": "on-device", "max_tokens": 12, "stream": True, "messages": [{"role": "user", "content": "Name a color."}]})
    for name, data in events_of(raw):
        check_anthropic_event(name, data)


def test_parse_with_a_pydantic_model(gateway):
    """``messages.parse(output_format=Model)`` sends ``output_config.format``; the backend gets the schema as the
    pipeline's ``output_format`` and the SDK parses the checked text block."""
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int
        mayor: str | None

    answer = json.dumps({"name": "Paris", "population": 2100000, "mayor": None})
    gw = gateway(models={"m": {"capabilities": STRUCTURED_CAPABILITIES, "steps": [{"json": {"text": answer, "chunks": 3}}]}})
    message = client_for(gw).messages.parse(
        model="m", max_tokens=64, messages=[{"role": "user", "content": "Paris?"}], output_format=City)
    assert message.parsed_output == City(name="Paris", population=2100000, mayor=None)
    sent = gw.generate_requests()[-1]["output_format"]
    assert sent["type"] == "json_schema" and sent["name"] == "output"
    assert list(sent["schema"]["properties"]) == ["name", "population", "mayor"]
    # An unrepresentable schema names its path; a model without the capability is refused, never emulated.
    status, raw = raw_post(gw, "/v1/messages", {
        "model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {"t": {"type": "array", "items": {}}}}}}})
    assert status == 400, raw
    check("anthropic", "ErrorResponse", json.loads(raw))
    assert "output_config.format.schema.properties.t.items" in json.loads(raw)["error"]["message"]


def test_parse_without_the_capability_is_refused(gateway):
    plain = dict(STRUCTURED_CAPABILITIES, structured_output=False)
    gw = gateway(models={"m": {"capabilities": plain, "steps": [{"text": "{}"}]}})
    status, raw = raw_post(gw, "/v1/messages", {
        "model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "x"}],
        "output_config": {"format": {"type": "json_schema", "schema": {"type": "object", "properties": {}}}}})
    assert status == 400, raw
    assert json.loads(raw)["error"]["type"] == "invalid_request_error"
    assert gw.generate_requests() == []


def test_local_model_parse_through_messages(gateway):
    """The real local model under ``messages.parse``: grammar-constrained, checked, parsed by the SDK."""
    from typing import Literal

    from pydantic import BaseModel, Field

    class Capital(BaseModel):
        city: str = Field(max_length=40)
        country: str = Field(max_length=40)
        size: Literal["small", "large"]

    gw = gateway(local=True)
    message = client_for(gw).messages.parse(
        model="on-device", max_tokens=120, extra_body={"temperature": 0},  # parse() has no temperature argument
        messages=[{"role": "user", "content": "What is the capital of France?"}], output_format=Capital)
    assert message.stop_reason == "end_turn", message
    assert isinstance(message.parsed_output, Capital)
    text = message.content[0].text
    assert text.index('"city"') < text.index('"country"') < text.index('"size"')
