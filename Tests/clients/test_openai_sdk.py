# SPDX-License-Identifier: Apache-2.0
"""The official openai Python SDK against a real afmd serving the scripted backend (issue 3, "Real clients")."""

from __future__ import annotations

import json

import openai
import pytest

# A 1×1 PNG.
ONE_PIXEL_PNG = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)

GREETING = ["Hello", ", ", "world", "!"]

# Properties deliberately out of alphabetical order: the backend must see them in this order.
WEATHER_PARAMETERS = {
    "type": "object",
    "properties": {
        "unit": {"type": "string", "enum": ["c", "f"], "description": "Temperature unit"},
        "city": {"type": "string", "description": "City name"},
    },
    "required": ["unit", "city"],
    "additionalProperties": False,
}
WEATHER_TOOL = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": WEATHER_PARAMETERS,
    "strict": True,
}


def client_for(gw, **options) -> openai.OpenAI:
    options.setdefault("timeout", 30)
    return openai.OpenAI(base_url=gw.base_url, api_key="unused", **options)


def text_steps(pieces: list[str]) -> list[dict]:
    return [{"text": piece} for piece in pieces]


def assert_full_usage(usage) -> None:
    """All five usage fields are present and consistent (reference §0.7)."""
    assert usage is not None
    assert isinstance(usage.input_tokens, int) and usage.input_tokens >= 0
    assert isinstance(usage.output_tokens, int) and usage.output_tokens >= 0
    assert isinstance(usage.input_tokens_details.cached_tokens, int)
    assert isinstance(usage.output_tokens_details.reasoning_tokens, int)
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens


# MARK: - Text


def test_non_streaming_text(gateway):
    gw = gateway(models={"greeter": text_steps(GREETING)})
    response = client_for(gw).responses.create(model="greeter", input="hi")

    assert response.status == "completed"
    assert response.model == "greeter"
    assert response.output_text == "Hello, world!"
    assert [item.type for item in response.output] == ["message"]
    assert_full_usage(response.usage)
    assert response.usage.output_tokens == len(GREETING)
    assert response.usage.input_tokens_details.cached_tokens == 0
    assert response.usage.output_tokens_details.reasoning_tokens == 0


def test_streaming_events_in_order(gateway):
    gw = gateway(models={"greeter": text_steps(GREETING)})
    stream = client_for(gw).responses.create(model="greeter", input="hi", stream=True)
    events = list(stream)

    types = [event.type for event in events]
    assert types[0] == "response.created", types
    assert types[1] == "response.in_progress", types
    assert types[-1] == "response.completed", types
    assert types.count("response.completed") == 1
    assert "error" not in types and "response.failed" not in types
    sequence = [event.sequence_number for event in events]
    assert sequence == sorted(sequence) and len(set(sequence)) == len(sequence), sequence

    # Item and part lifecycle (reference §1.7): added, part added, deltas, text done, part done, item done.
    lifecycle = [t for t in types if t not in ("response.output_text.delta",)]
    assert lifecycle == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == "Hello, world!"
    assert deltas == GREETING
    done = next(event for event in events if event.type == "response.output_text.done")
    assert done.text == "Hello, world!"

    final = events[-1].response
    assert final.status == "completed"
    assert final.output_text == "Hello, world!"
    item_id = next(event for event in events if event.type == "response.output_item.added").item.id
    assert final.output[0].id == item_id
    assert_full_usage(final.usage)


def test_stream_helper_get_final_response(gateway):
    gw = gateway(models={"greeter": text_steps(GREETING)})
    with client_for(gw).responses.stream(model="greeter", input="hi") as stream:
        texts = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()

    assert "".join(texts) == "Hello, world!"
    assert final.status == "completed"
    assert final.output_text == "Hello, world!"
    assert_full_usage(final.usage)


# MARK: - Function tools


@pytest.mark.parametrize(
    ("tool_choice", "expected_mode"),
    [
        ("required", {"mode": "required"}),
        ({"type": "function", "name": "get_weather"}, {"mode": "function", "name": "get_weather"}),
    ],
    ids=["required", "named"],
)
def test_function_tool_round_trip(gateway, tool_choice, expected_mode):
    arguments = '{"unit":"c","city":"Paris"}'
    gw = gateway(
        models={
            # Turn 1 calls the tool (arguments streamed in 3 deltas); turn 2 answers from the tool output.
            "weather-call": [
                {"tool_call": {"name": "get_weather", "call_id": "call_w1", "arguments": arguments, "chunks": 3}}
            ],
            "weather-answer": text_steps(["It is ", "21 °C ", "in Paris."]),
        }
    )
    client = client_for(gw)
    question = [{"role": "user", "content": "What is the weather in Paris?"}]

    first = client.responses.create(
        model="weather-call", input=question, tools=[WEATHER_TOOL], tool_choice=tool_choice
    )
    assert first.status == "completed"
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1, first.output
    call = calls[0]
    assert call.call_id == "call_w1"
    assert call.name == "get_weather"
    assert json.loads(call.arguments) == {"unit": "c", "city": "Paris"}
    assert call.id and call.id != call.call_id
    assert call.id.startswith("fc_")
    assert_full_usage(first.usage)

    tool_output = json.dumps({"temperature_c": 21, "sky": "clear"})
    second = client.responses.create(
        model="weather-answer",
        input=question
        + list(first.output)
        + [{"type": "function_call_output", "call_id": call.call_id, "output": tool_output}],
        tools=[WEATHER_TOOL],
        tool_choice="auto",
    )
    assert second.status == "completed"
    assert second.output_text == "It is 21 °C in Paris."

    requests = gw.generate_requests()
    assert [request["model"] for request in requests] == ["weather-call", "weather-answer"]
    for request in requests:
        assert [tool["name"] for tool in request["tools"]] == ["get_weather"]
        tool = request["tools"][0]
        assert tool["description"] == "Current weather for a city"
        assert tool["parameters"]["required"] == ["unit", "city"]
        assert list(tool["parameters"]["properties"]) == ["unit", "city"], "property order must be preserved"
        assert tool["parameters"]["properties"]["unit"]["enum"] == ["c", "f"]
    assert requests[0]["tool_choice"] == expected_mode
    assert requests[1]["tool_choice"] == {"mode": "auto"}

    replay = requests[1]["input"]
    assert [item["type"] for item in replay] == ["message", "function_call", "function_call_output"]
    assert replay[0]["role"] == "user"
    assert replay[0]["content"] == [{"type": "text", "text": "What is the weather in Paris?"}]
    assert {key: replay[1][key] for key in ("call_id", "name", "arguments")} == {
        "call_id": "call_w1",
        "name": "get_weather",
        "arguments": arguments,
    }
    assert replay[2]["call_id"] == "call_w1"
    assert replay[2]["output"] == tool_output


def test_function_call_streams_argument_deltas(gateway):
    arguments = '{"unit":"f","city":"Boston"}'
    gw = gateway(models={"weather-call": [{"tool_call": {"name": "get_weather", "arguments": arguments, "chunks": 4}}]})
    events = list(
        client_for(gw).responses.create(
            model="weather-call", input="weather?", tools=[WEATHER_TOOL], tool_choice="required", stream=True
        )
    )
    types = [event.type for event in events]
    assert types[0] == "response.created" and types[-1] == "response.completed", types
    added = next(event for event in events if event.type == "response.output_item.added")
    assert added.item.type == "function_call"
    deltas = [event for event in events if event.type == "response.function_call_arguments.delta"]
    assert len(deltas) == 4
    assert all(event.item_id == added.item.id for event in deltas)
    assert "".join(event.delta for event in deltas) == arguments
    done = next(event for event in events if event.type == "response.function_call_arguments.done")
    assert done.arguments == arguments
    final_call = events[-1].response.output[0]
    assert final_call.type == "function_call"
    assert final_call.id == added.item.id
    assert json.loads(final_call.arguments) == {"unit": "f", "city": "Boston"}


# MARK: - Refusals


def test_image_input_rejected_on_text_only_model(gateway):
    gw = gateway(models={"text-only": text_steps(["never"])})
    with pytest.raises(openai.BadRequestError) as raised:
        client_for(gw, max_retries=0).responses.create(
            model="text-only",
            input=[
                {
                    "role": "user",
                    "content": [
                        {"type": "input_text", "text": "What is in this picture?"},
                        {"type": "input_image", "image_url": ONE_PIXEL_PNG, "detail": "auto"},
                    ],
                }
            ],
        )
    assert raised.value.status_code == 400
    assert raised.value.code == "unsupported_capability", raised.value.body
    assert gw.generate_requests() == [], "a refused request must not reach the backend"


def test_previous_response_id_then_stateless_retry(gateway):
    gw = gateway(models={"greeter": text_steps(GREETING)})
    client = client_for(gw, max_retries=0)
    with pytest.raises(openai.BadRequestError) as raised:
        client.responses.create(model="greeter", input="hi again", previous_response_id="resp_earlier")
    assert raised.value.code == "previous_response_not_found", raised.value.body
    assert raised.value.param == "previous_response_id"

    # What VS Code Copilot Chat does next: resend the whole history without previous_response_id.
    retry = client.responses.create(
        model="greeter",
        input=[
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "Hello, world!"},
            {"role": "user", "content": "hi again"},
        ],
    )
    assert retry.status == "completed"
    assert retry.output_text == "Hello, world!"
    assert len(gw.generate_requests()) == 1


# MARK: - Errors


def test_unknown_model_is_not_found(gateway):
    gw = gateway(models={"greeter": text_steps(GREETING)})
    with pytest.raises(openai.NotFoundError) as raised:
        client_for(gw, max_retries=0).responses.create(model="no-such-model", input="hi")
    assert raised.value.status_code == 404
    assert raised.value.code == "model_not_found", raised.value.body
    assert raised.value.param == "model"


def test_backend_rate_limit_before_output(gateway):
    gw = gateway(models={"busy": [{"error": {"code": "rate_limited", "message": "slow down"}}]})
    with pytest.raises(openai.RateLimitError) as raised:
        client_for(gw, max_retries=0).responses.create(model="busy", input="hi")
    assert raised.value.status_code == 429
    assert raised.value.code, raised.value.body
    assert "slow down" in raised.value.message


def test_mid_stream_error_ends_in_response_failed(gateway):
    gw = gateway(
        models={"flaky": text_steps(["Partial ", "answer"]) + [{"error": {"code": "internal", "message": "boom"}}]}
    )
    events = list(client_for(gw, max_retries=0).responses.create(model="flaky", input="hi", stream=True))

    types = [event.type for event in events]
    assert types[0] == "response.created", types
    assert types[-2:] == ["error", "response.failed"], types
    assert "response.completed" not in types
    deltas = [event.delta for event in events if event.type == "response.output_text.delta"]
    assert "".join(deltas) == "Partial answer"
    error = events[-2]
    assert error.code and error.message
    failed = events[-1].response
    assert failed.status == "failed"
    assert failed.error is not None and failed.error.code and failed.error.message
    assert_full_usage(failed.usage)
