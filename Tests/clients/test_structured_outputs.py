# SPDX-License-Identifier: Apache-2.0
"""Structured outputs with the real ``openai`` SDK against afmd and the real local model (SmolLM2-135M and
Gemma 3 270M, each in its own afmd): ``responses.parse(text_format=…)``, ``responses.stream(text_format=…)`` and
``json_object`` mode. The local backend constrains decoding with a grammar built from the schema and the host
checks the answer, so a completed response always parses into the Pydantic model."""

from __future__ import annotations

import json
from enum import Enum
from typing import Literal, Optional

import openai
import pytest
from pydantic import BaseModel, Field

from conftest import Gateway


class Kind(str, Enum):
    capital = "capital"
    town = "town"


class Street(BaseModel):
    name: str = Field(max_length=40)
    length_km: int = Field(ge=0, le=100)


# Free text is bounded (``max_length``, enforced by the grammar): at temperature 0 a 135M model repeats one sentence
# for as long as a string may run, so an unbounded ``reasoning`` ends ``incomplete`` at any output cap.
class City(BaseModel):
    """A nested model, a list of models, an enum, a Literal, an Optional and a field with a default."""

    reasoning: str = Field(max_length=240)
    name: str = Field(max_length=40)
    kind: Kind
    size: Literal["small", "large"]
    mayor: Optional[str] = Field(max_length=40)
    population: int = 0
    streets: list[Street] = Field(max_length=2)


def client(gateway: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.base_url, api_key="unused", max_retries=0, timeout=1800)


PROMPT = "Describe Paris briefly."


def test_parse_returns_the_pydantic_model(local_gateway: Gateway) -> None:
    response = client(local_gateway).responses.parse(
        model="on-device", input=PROMPT, text_format=City, max_output_tokens=300, temperature=0
    )
    assert response.status == "completed", response
    city = response.output_parsed
    assert isinstance(city, City)
    assert isinstance(city.kind, Kind) and city.size in ("small", "large")
    assert len(city.reasoning) <= 240 and len(city.name) <= 40
    assert len(city.streets) <= 2 and all(0 <= street.length_km <= 100 for street in city.streets)
    # Members come in schema order: the model reasons before it answers.
    text = response.output_text
    assert text.index('"reasoning"') < text.index('"name"') < text.index('"streets"')
    # The format is echoed.
    assert response.text.format.type == "json_schema"
    assert response.text.format.name == "City"


def test_stream_gives_output_parsed(local_gateway: Gateway) -> None:
    deltas: list[str] = []
    with client(local_gateway).responses.stream(
        model="on-device", input=PROMPT, text_format=City, max_output_tokens=300, temperature=0
    ) as stream:
        for event in stream:
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
        final = stream.get_final_response()
    assert final.status == "completed"
    assert isinstance(final.output_parsed, City)
    assert "".join(deltas) == final.output_text


def test_json_object_mode(local_gateway: Gateway) -> None:
    response = client(local_gateway).responses.create(
        model="on-device",
        input='Reply with a JSON object with two keys, "city" and "country": the capital of France and its country.',
        text={"format": {"type": "json_object"}},
        max_output_tokens=200,
        temperature=0,
    )
    assert response.status == "completed", response
    assert isinstance(json.loads(response.output_text), dict)


def test_an_unrepresentable_schema_is_a_400_naming_the_path(local_gateway: Gateway) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        client(local_gateway).responses.create(
            model="on-device",
            input="x",
            text={
                "format": {
                    "type": "json_schema",
                    "name": "Tags",
                    "schema": {"type": "object", "properties": {"tags": {"type": "array", "items": {}}}},
                }
            },
        )
    assert raised.value.code == "invalid_json_schema"
    assert raised.value.param == "text.format.schema.properties.tags.items"


def test_a_bound_the_grammar_sampler_cannot_take_is_a_400(local_gateway: Gateway) -> None:
    """llama.cpp's grammar parser refuses repetitions above 2000; a schema asking for one is the client's error
    (400 ``invalid_request`` saying why), never a 500."""
    schema = {
        "type": "object",
        "properties": {"essay": {"type": "string", "minLength": 3000}},
        "required": ["essay"],
        "additionalProperties": False,
    }
    with pytest.raises(openai.BadRequestError) as raised:
        client(local_gateway).responses.create(
            model="on-device",
            input="x",
            max_output_tokens=8,
            text={"format": {"type": "json_schema", "name": "Essay", "schema": schema}},
        )
    assert raised.value.code == "invalid_request"
    assert "minLength" in str(raised.value)


def test_a_length_bound_above_the_grammar_limit_is_a_400_naming_it(local_gateway: Gateway) -> None:
    """llama.cpp's grammar reads a maxLength/maxItems above 2000 as unbounded, so a longer answer failed the host's
    check (500 ``invalid_structured_output``). The local backend refuses such a bound: 400 naming the keyword by its
    path in the request and the limit."""
    schema = {
        "type": "object",
        "properties": {"essay": {"type": "string", "maxLength": 2500}},
        "required": ["essay"],
        "additionalProperties": False,
    }
    with pytest.raises(openai.BadRequestError) as raised:
        client(local_gateway).responses.create(
            model="on-device",
            input="x",
            max_output_tokens=8,
            text={"format": {"type": "json_schema", "name": "Essay", "schema": schema}},
        )
    assert raised.value.code == "invalid_request"
    assert raised.value.param == "text.format.schema.properties.essay.maxLength"
    assert "2000" in str(raised.value) and "2500" in str(raised.value)


class Rating(BaseModel):
    # Pydantic's ge/le/gt/lt on floats: whole-number bounds, enforced by the local backend's grammar.
    score: float = Field(ge=0, le=10)
    share: float = Field(gt=0, lt=1)
    delta: float = Field(ge=-5, le=-1)


def test_number_bounds_hold_on_the_local_model(local_gateway: Gateway) -> None:
    """Bounds of a ``number`` were checked by the host but not by llama.cpp's grammar, so a model writing 250 for
    ``le=10`` ended 500 ``invalid_structured_output``. Prompts that invite out-of-range values, at temperature 0 and
    sampled: every answer completes and lies in range."""
    prompts = [
        "The film scored 250 points, a share of 97 percent, and changed by +40. Rate it as JSON.",
        "Score: 1000. Share: 5. Delta: 300. Copy these numbers into the JSON.",
        "Give a score of -7, a share of 2.5 and a delta of 12.",
    ]
    for prompt in prompts:
        for temperature in (0, 1.5):
            response = client(local_gateway).responses.parse(
                model="on-device", input=prompt, text_format=Rating, max_output_tokens=80, temperature=temperature
            )
            assert response.status == "completed", response
            rating = response.output_parsed
            assert 0 <= rating.score <= 10 and 0 < rating.share < 1 and -5 <= rating.delta <= -1, rating


def test_a_number_bound_the_grammar_cannot_write_is_a_400_naming_it(local_gateway: Gateway) -> None:
    """A bound of a ``number`` that is not a whole number (0.5) cannot be written by the local backend's grammar:
    400 naming the keyword's path, never a later 500."""
    schema = {
        "type": "object",
        "properties": {"p": {"type": "number", "minimum": 0, "maximum": 0.5}},
        "required": ["p"],
        "additionalProperties": False,
    }
    with pytest.raises(openai.BadRequestError) as raised:
        client(local_gateway).responses.create(
            model="on-device",
            input="x",
            max_output_tokens=8,
            text={"format": {"type": "json_schema", "name": "P", "schema": schema}},
        )
    assert raised.value.code == "invalid_request"
    assert raised.value.param == "text.format.schema.properties.p.maximum"


def test_a_tool_bound_the_local_backend_refuses_is_a_400_naming_its_path(local_gateway: Gateway) -> None:
    """The local backend refuses a tool schema its grammar cannot take (a ``minLength`` above 2000, the repetition
    budget of 50,000 over the request's schemas) by the path in the generation request document. That refusal
    names its JSON path in ``param`` under the client's own field, as the output schema's refusal does: the tool's
    ``parameters`` in Responses, ``function.parameters`` in Chat Completions (it had no ``param``)."""
    long = {
        "type": "object",
        "properties": {"text": {"type": "string", "minLength": 5000}},
        "required": ["text"],
        "additionalProperties": False,
    }
    budget = {
        "type": "object",
        "properties": {f"p{i}": {"type": "string", "maxLength": 2000} for i in range(26)},
        "required": [],
        "additionalProperties": False,
    }
    gateway = client(local_gateway)
    for schema, keyword in ((long, "properties.text.minLength"), (budget, "maxLength")):
        # A hosted tool first: it is dropped, so the function is the document's tools[0] but the client's tools[1].
        with pytest.raises(openai.BadRequestError) as raised:
            gateway.responses.create(
                model="on-device",
                input="x",
                max_output_tokens=8,
                tools=[
                    {"type": "web_search"},
                    {"type": "function", "name": "save", "parameters": schema},
                ],
            )
        assert raised.value.code == "invalid_request"
        param = raised.value.param or ""
        assert param.startswith("tools[1].parameters.properties.") and param.endswith(keyword.split(".")[-1]), param
        assert keyword in param or keyword == "maxLength", param
        with pytest.raises(openai.BadRequestError) as raised:
            gateway.chat.completions.create(
                model="on-device",
                messages=[{"role": "user", "content": "x"}],
                max_tokens=8,
                tools=[{"type": "function", "function": {"name": "save", "parameters": schema}}],
            )
        param = raised.value.param or ""
        assert param.startswith("tools[0].function.parameters.properties.") and param.endswith(keyword.split(".")[-1]), param
