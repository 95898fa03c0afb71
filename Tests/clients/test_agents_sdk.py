# SPDX-License-Identifier: Apache-2.0
"""The openai-agents SDK: a Runner with one function tool over the scripted backend (issue 3, "Real clients").

An agent loop sends every turn to the same model, so the script branches on the request: while the input has no
`function_call_output` item the model calls the tool, and once the tool's output is in the input it answers. That is
the scripted backend's `if_input_has` step (docs/backend-abi.md §10.2).
"""

from __future__ import annotations

import asyncio

import openai
from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled

set_tracing_disabled(True)

ANSWER = ["The weather ", "in Paris ", "is sunny, ", "21 °C."]
AGENT_MODEL = [
    {
        "if_input_has": "function_call_output",
        "then": [{"text": piece} for piece in ANSWER],
        "else": [{"tool_call": {"name": "get_weather", "call_id": "call_agent_1", "arguments": '{"city":"Paris"}'}}],
    }
]
INSTRUCTIONS = "You answer weather questions. Always call get_weather."


def weather_agent(gw, calls: list[str]) -> Agent:
    @function_tool
    def get_weather(city: str) -> str:
        """Current weather for a city.

        Args:
            city: The city name.
        """
        calls.append(city)
        return f"sunny, 21 °C in {city}"

    client = openai.AsyncOpenAI(base_url=gw.base_url, api_key="unused", timeout=30, max_retries=0)
    return Agent(
        name="Weather",
        instructions=INSTRUCTIONS,
        tools=[get_weather],
        model=OpenAIResponsesModel(model="agent", openai_client=client),
    )


def assert_two_turns(gw, *, stream: bool) -> None:
    requests = gw.generate_requests()
    assert len(requests) == 2, requests
    for request in requests:
        assert request["model"] == "agent"
        assert request["stream"] is stream
        assert INSTRUCTIONS in request["system"]
        assert [tool["name"] for tool in request["tools"]] == ["get_weather"]
        parameters = request["tools"][0]["parameters"]
        assert list(parameters["properties"]) == ["city"]
        assert parameters["required"] == ["city"]
    first, second = (request["input"] for request in requests)
    assert [item["type"] for item in first] == ["message"]
    assert first[0]["content"] == [{"type": "text", "text": "What is the weather in Paris?"}]
    assert [item["type"] for item in second] == ["message", "function_call", "function_call_output"]
    assert second[1]["call_id"] == "call_agent_1" and second[1]["name"] == "get_weather"
    assert second[2]["call_id"] == "call_agent_1"
    assert second[2]["output"] == "sunny, 21 °C in Paris"


def test_runner_calls_the_tool_and_answers(gateway):
    gw = gateway(models={"agent": AGENT_MODEL})
    calls: list[str] = []
    result = Runner.run_sync(weather_agent(gw, calls), "What is the weather in Paris?")

    assert calls == ["Paris"]
    assert result.final_output == "".join(ANSWER)
    assert len(result.raw_responses) == 2
    usage = result.context_wrapper.usage
    assert usage.requests == 2
    assert usage.output_tokens == len(ANSWER)  # the scripted tool call counts no output tokens
    assert usage.total_tokens == usage.input_tokens + usage.output_tokens
    assert_two_turns(gw, stream=False)


def test_runner_streamed(gateway):
    gw = gateway(models={"agent": AGENT_MODEL})
    calls: list[str] = []

    async def run() -> tuple[object, list[str]]:
        result = Runner.run_streamed(weather_agent(gw, calls), "What is the weather in Paris?")
        kinds = [event.type async for event in result.stream_events()]
        return result, kinds

    result, kinds = asyncio.run(run())
    assert calls == ["Paris"]
    assert result.final_output == "".join(ANSWER)
    assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
    assert_two_turns(gw, stream=True)
