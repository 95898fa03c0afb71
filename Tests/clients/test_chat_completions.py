# SPDX-License-Identifier: Apache-2.0
"""The openai SDK's Chat Completions client against a real afmd (issue 15): the scripted backend for exact
answers, the real local model for real ones. Every body and chunk is validated against OpenAI's pinned OpenAPI
schemas (Tests/schemas)."""

from __future__ import annotations

import json
import urllib.request

import openai
import pytest

from conftest import STRUCTURED_CAPABILITIES
from schemas import check

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"], "additionalProperties": False},
    },
}
CALL_STEPS = [
    {"tool_call": {"name": "get_weather", "call_id": "call_w1", "arguments": json.dumps({"city": "Paris"}), "chunks": 3}},
    {"finish": "tool_calls"},
]


def client_for(gw) -> openai.OpenAI:
    return openai.OpenAI(base_url=gw.base_url, api_key="unused", timeout=60)


def raw_post(gw, path: str, body: dict) -> tuple[int, bytes]:
    request = urllib.request.Request(
        gw.origin + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def chunks_of(raw: bytes) -> list:
    lines = [line[6:] for line in raw.decode().split("\n") if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(line) for line in lines[:-1]]


def test_plain_completion(gateway):
    gw = gateway(models={"m": [{"text": "Hello"}, {"text": ", world"}]})
    completion = client_for(gw).chat.completions.create(
        model="m", messages=[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}])
    assert completion.choices[0].message.content == "Hello, world"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.completion_tokens == 2
    assert completion.id.startswith("chatcmpl-")
    status, raw = raw_post(gw, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "hi"}]})
    assert status == 200
    check("openai", "CreateChatCompletionResponse", json.loads(raw))


def test_stream_with_usage(gateway):
    gw = gateway(models={"m": [{"text": "Hel"}, {"text": "lo"}]})
    stream = client_for(gw).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True, stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 2
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]
    status, raw = raw_post(
        gw, "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "stream_options": {"include_usage": True}})
    for chunk in chunks_of(raw):
        check("openai", "CreateChatCompletionStreamResponse", chunk)


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_tool_choice_required_and_named(gateway, choice):
    gw = gateway(models={"m": CALL_STEPS})
    completion = client_for(gw).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "weather in Paris?"}], tools=[WEATHER_TOOL], tool_choice=choice)
    call = completion.choices[0].message.tool_calls[0]
    assert (call.id, call.function.name, json.loads(call.function.arguments)) == ("call_w1", "get_weather", {"city": "Paris"})
    assert completion.choices[0].finish_reason == "tool_calls"
    expected = {"mode": "required"} if choice == "required" else {"mode": "function", "name": "get_weather"}
    assert gw.generate_requests()[-1]["tool_choice"] == expected


def test_tool_round_trip_streamed(gateway):
    gw = gateway(models={"m": [{"if_input_has": "function_call_output", "then": [{"text": "It is sunny."}], "else": CALL_STEPS}]})
    client = client_for(gw)
    messages = [{"role": "user", "content": "weather in Paris?"}]
    with client.chat.completions.stream(model="m", messages=messages, tools=[WEATHER_TOOL]) as stream:
        final = stream.get_final_completion()
    call = final.choices[0].message.tool_calls[0]
    assert call.function.name == "get_weather" and json.loads(call.function.arguments) == {"city": "Paris"}
    messages += [final.choices[0].message.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": "sunny"}]
    answer = client.chat.completions.create(model="m", messages=messages, tools=[WEATHER_TOOL])
    assert answer.choices[0].message.content == "It is sunny."
    last = gw.generate_requests()[-1]["input"]
    assert [item["type"] for item in last] == ["message", "function_call", "function_call_output"]
    status, raw = raw_post(gw, "/v1/chat/completions", {"model": "m", "messages": messages[:1], "tools": [WEATHER_TOOL], "stream": True})
    for chunk in chunks_of(raw):
        check("openai", "CreateChatCompletionStreamResponse", chunk)


def test_errors_are_openai_errors(gateway):
    gw = gateway(models={"m": [{"text": "x"}]})
    with pytest.raises(openai.BadRequestError) as caught:
        client_for(gw).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], n=2)
    assert caught.value.body["param"] == "n"
    with pytest.raises(openai.NotFoundError):
        client_for(gw).chat.completions.create(model="nope", messages=[{"role": "user", "content": "x"}])
    status, raw = raw_post(gw, "/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 400
    check("openai", "ErrorResponse", json.loads(raw))


def test_failure_mid_stream_raises(gateway):
    gw = gateway(models={"m": [{"text": "partial"}, {"error": {"code": "internal", "message": "exploded"}}]})
    stream = client_for(gw).chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}], stream=True)
    with pytest.raises(openai.APIError):
        for _ in stream:
            pass


def test_models_list_serves_openai_clients(gateway):
    gw = gateway(models={"m": [{"text": "x"}]})
    ids = [model.id for model in client_for(gw).models.list()]
    assert "m" in ids
    with urllib.request.urlopen(gw.base_url + "/models", timeout=10) as answer:
        check("openai", "ListModelsResponse", json.load(answer))


def test_local_model_answers_through_chat_completions(gateway):
    gw = gateway(local=True)
    client = client_for(gw)
    completion = client.chat.completions.create(
        model="on-device", messages=[{"role": "user", "content": "What is the capital of France?"}], max_completion_tokens=24)
    assert completion.choices[0].message.content.strip()
    assert completion.choices[0].finish_reason in ("stop", "length")
    assert completion.model != "on-device"
    stream = client.chat.completions.create(
        model="on-device", messages=[{"role": "user", "content": "Say hello."}], max_completion_tokens=16, stream=True,
        stream_options={"include_usage": True})
    chunks = list(stream)
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices).strip()
    assert chunks[-1].usage.completion_tokens > 0
    status, raw = raw_post(
        gw, "/v1/chat/completions",
        {"model": "on-device", "messages": [{"role": "user", "content": "Name a color."}], "max_tokens": 12, "stream": True,
         "stop": ["\n\n"]})
    assert status == 200
    for chunk in chunks_of(raw):
        check("openai", "CreateChatCompletionStreamResponse", chunk)


def test_parse_with_a_pydantic_model(gateway):
    from pydantic import BaseModel

    class City(BaseModel):
        name: str
        population: int
        mayor: str | None

    answer = json.dumps({"name": "Paris", "population": 2100000, "mayor": None})
    gw = gateway(models={"m": {"capabilities": STRUCTURED_CAPABILITIES, "steps": [{"json": {"text": answer, "chunks": 3}}]}})
    completion = client_for(gw).chat.completions.parse(model="m", messages=[{"role": "user", "content": "Paris?"}], response_format=City)
    assert completion.choices[0].message.parsed == City(name="Paris", population=2100000, mayor=None)
    sent = gw.generate_requests()[-1]["output_format"]
    assert sent["type"] == "json_schema" and sent["name"] == "City" and sent["strict"] is True
    status, raw = raw_post(
        gw, "/v1/chat/completions",
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}})
    assert status == 200
    check("openai", "CreateChatCompletionResponse", json.loads(raw))


def test_an_invalid_structured_answer_fails(gateway):
    gw = gateway(models={"m": {"capabilities": STRUCTURED_CAPABILITIES, "steps": [{"json": {"text": "not json", "chunks": 1}}]}})
    with pytest.raises(openai.InternalServerError) as caught:
        client_for(gw).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x"}], response_format={"type": "json_object"})
    assert caught.value.body["code"] == "invalid_structured_output"


def test_a_seed_makes_sampled_answers_repeatable_on_the_local_model(gateway):
    """``seed`` reaches the local backend's sampler: at temperature 1 the same seed gives the same answer; Messages'
    ``top_k`` is taken too (``top_k=1`` samples greedily, so two answers agree)."""
    gw = gateway(local=True)
    client = client_for(gw)

    def sampled(seed: int) -> str:
        completion = client.chat.completions.create(
            model="on-device", messages=[{"role": "user", "content": "Invent a name for a cat."}],
            max_completion_tokens=24, temperature=1.0, seed=seed)
        return completion.choices[0].message.content

    first = sampled(1234)
    assert first.strip()
    assert sampled(1234) == first
    answers = set()
    for _ in range(2):
        status, raw = raw_post(gw, "/v1/messages", {
            "model": "on-device", "max_tokens": 16, "temperature": 1.0, "top_k": 1,
            "messages": [{"role": "user", "content": "Invent a name for a dog."}]})
        assert status == 200, raw
        answers.add(json.loads(raw)["content"][0]["text"])
    assert len(answers) == 1
