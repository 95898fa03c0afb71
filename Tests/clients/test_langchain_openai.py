# SPDX-License-Identifier: Apache-2.0
"""LangChain's ChatOpenAI (langchain-openai) against a real afmd's Chat Completions dialect (issue 15)."""

from __future__ import annotations

import json

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_openai import ChatOpenAI

CALL_STEPS = [
    {"tool_call": {"name": "get_weather", "call_id": "call_l1", "arguments": json.dumps({"city": "Paris"}), "chunks": 2}},
    {"finish": "tool_calls"},
]


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "sunny"


def chat_for(gw, model: str, **options) -> ChatOpenAI:
    return ChatOpenAI(model=model, base_url=gw.base_url, api_key="unused", timeout=60, max_retries=0, **options)


def test_invoke_and_stream(gateway):
    gw = gateway(models={"m": [{"text": "Hello"}, {"text": ", world"}]})
    chat = chat_for(gw, "m", max_completion_tokens=50)
    assert chat.invoke("hi").content == "Hello, world"
    assert "".join(chunk.content for chunk in chat.stream("hi")) == "Hello, world"
    assert gw.generate_requests()[0]["max_output_tokens"] == 50


def test_bind_tools_round_trip(gateway):
    gw = gateway(models={"m": [{"if_input_has": "function_call_output", "then": [{"text": "Sunny."}], "else": CALL_STEPS}]})
    chat = chat_for(gw, "m").bind_tools([get_weather])
    question = HumanMessage("weather in Paris?")
    first = chat.invoke([question])
    assert first.tool_calls[0]["name"] == "get_weather" and first.tool_calls[0]["args"] == {"city": "Paris"}
    second = chat.invoke([question, first, ToolMessage("sunny", tool_call_id=first.tool_calls[0]["id"])])
    assert second.content == "Sunny."
    streamed = None
    for chunk in chat.stream([question]):
        streamed = chunk if streamed is None else streamed + chunk
    assert streamed.tool_calls[0]["args"] == {"city": "Paris"}


def test_local_model_invoke(gateway):
    gw = gateway(local=True)
    answer = chat_for(gw, "on-device", max_completion_tokens=24).invoke("What is the capital of France?")
    assert answer.content.strip()


def test_with_structured_output(gateway):
    from pydantic import BaseModel

    class Weather(BaseModel):
        city: str
        sunny: bool

    capabilities = {"streaming": True, "tools": True, "vision": False, "reasoning": False, "structured_output": True}
    answer = json.dumps({"city": "Paris", "sunny": True})
    gw = gateway(models={"m": {"capabilities": capabilities, "steps": [{"json": {"text": answer, "chunks": 2}}]}})
    structured = chat_for(gw, "m").with_structured_output(Weather)
    assert structured.invoke("weather in Paris?") == Weather(city="Paris", sunny=True)
    assert gw.generate_requests()[-1]["output_format"]["name"] == "Weather"
    streamed = list(structured.stream("weather in Paris?"))
    assert streamed[-1] == Weather(city="Paris", sunny=True)
