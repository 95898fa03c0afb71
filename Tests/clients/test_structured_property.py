# SPDX-License-Identifier: Apache-2.0
"""Property test: generated schemas inside the subset (docs/responses-api.md, "The schema subset"), each sent to
the real local model (SmolLM2-135M) with a short output cap. Whatever the model does, no answer may be
``completed`` and invalid: a completed answer parses and validates against the schema as the client sent it
(checked here with the ``jsonschema`` package, independently of afmd's own check); a capped one is ``incomplete``.
The number of completed answers is printed (docs/PERFORMANCE.md records it)."""

from __future__ import annotations

import json
import os
import random
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import jsonschema
import pytest

from conftest import MODELS, Gateway, start_local_gateway

CASES = int(os.environ.get("AFM_SCHEMA_PROPERTY_CASES", "200"))
SEED = 20261201
NAMES = ["name", "city", "count", "tags", "ok", "score", "kind", "items", "note", "level", "owner", "size"]


class SchemaMaker:
    """Random schemas of the subset: objects (property order and required sets vary), strings (some with length
    bounds), integers with ranges, numbers (some with whole-number bounds), booleans, enums, consts, arrays with counts, Optionals (anyOf with null
    and type arrays), string-literal unions, unions of objects, $defs with $ref, recursion through an array."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.defs: dict[str, Any] = {}

    def scalar(self) -> dict[str, Any]:
        r = self.rng
        choice = r.randrange(9)
        if choice == 0:
            return {"type": "string"}
        if choice == 7:
            low = r.randrange(0, 3)
            return {"type": "string", "minLength": low, "maxLength": low + r.randrange(0, 12)}
        if choice == 1:
            low = r.randrange(-5, 5)
            return {"type": "integer", "minimum": low, "maximum": low + r.randrange(1, 50)}
        if choice == 2:
            return {"type": "integer"}
        if choice == 3:
            return {"type": "boolean"}
        if choice == 4:
            return {"type": "string", "enum": r.sample(["red", "green", "blue", "a b", "x"], r.randrange(1, 4))}
        if choice == 5:
            return {"const": r.choice(["yes", 1, True, None])}
        if choice == 6:
            return self.number()
        return {"anyOf": [{"const": "low"}, {"const": "high"}]}

    def number(self) -> dict[str, Any]:
        """A number, unbounded or with whole-number bounds (inclusive or exclusive, one- or two-sided, negative
        ranges, a unit interval): the local backend's grammar writes these as range rules, and the answer check
        compares them exactly, so a completed answer must land inside."""
        r = self.rng
        kind = r.randrange(6)
        if kind == 0:
            return {"type": "number"}
        if kind == 1:
            return {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1}
        low = r.randrange(-100, 100)
        high = low + r.randrange(1, 200)
        if kind == 2:
            return {"type": "number", "minimum": low, "maximum": high}
        if kind == 3:
            return {"type": "number", "exclusiveMinimum": low, "exclusiveMaximum": high}
        if kind == 4:
            return {"type": "number", r.choice(["minimum", "exclusiveMinimum"]): low}
        return {"type": "number", r.choice(["maximum", "exclusiveMaximum"]): high}

    def node(self, depth: int) -> dict[str, Any]:
        r = self.rng
        if depth >= 3:
            return self.scalar()
        choice = r.randrange(10)
        if choice < 4:
            return self.scalar()
        if choice == 4:
            return {"type": "array", "items": self.node(depth + 1), "minItems": r.randrange(0, 2), "maxItems": r.randrange(2, 4)}
        if choice == 5:
            return {"anyOf": [self.node(depth + 1), {"type": "null"}]}
        if choice == 6:
            return {"type": [r.choice(["string", "integer", "boolean"]), "null"]}
        if choice == 7:
            name = f"D{len(self.defs)}"
            self.defs[name] = self.obj(depth + 1)
            return {"$ref": f"#/$defs/{name}"}
        if choice == 8:
            return {"anyOf": [self.obj(depth + 1), self.obj(depth + 1), {"type": "string"}]}
        return self.obj(depth + 1)

    def obj(self, depth: int) -> dict[str, Any]:
        r = self.rng
        names = r.sample(NAMES, r.randrange(1, 4))
        properties = {name: self.node(depth) for name in names}
        required = [name for name in names if r.random() < 0.8]
        schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
        if required:
            schema["required"] = required
        return schema

    def make(self) -> dict[str, Any]:
        self.defs = {}
        r = self.rng
        if r.random() < 0.1:
            # Recursion: a tree whose children are trees.
            return {
                "type": "object",
                "properties": {"label": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}, "maxItems": 2}},
                "required": ["label", "children"],
                "additionalProperties": False,
            }
        root = self.obj(0) if r.random() < 0.85 else self.node(1)
        if self.defs:
            root = {"$defs": self.defs, **root}
        return root


def schemas() -> list[dict[str, Any]]:
    maker = SchemaMaker(random.Random(SEED))
    return [maker.make() for _ in range(CASES)]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    gw = start_local_gateway(tmp_path_factory.mktemp("smollm2-property"), MODELS["smollm2"])
    yield gw
    assert gw.stop() == 0, gw.log()


def post(gateway: Gateway, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        f"{gateway.base_url}/responses", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=1800) as answer:
            return answer.status, json.load(answer)
    except urllib.error.HTTPError as error:
        return error.code, json.load(error)


def test_no_generated_schema_gets_a_completed_invalid_answer(smollm2: Gateway) -> None:
    assert CASES >= 200 or "AFM_SCHEMA_PROPERTY_CASES" in os.environ
    outcomes: dict[str, int] = {}
    for index, schema in enumerate(schemas()):
        jsonschema.Draft202012Validator.check_schema(schema)
        body = {
            "model": "on-device",
            "input": f"Fill in example values (case {index}).",
            "max_output_tokens": 48,
            "temperature": 0.8,
            "text": {"format": {"type": "json_schema", "name": f"case_{index}", "schema": schema}},
        }
        status, answer = post(smollm2, body)
        assert status == 200, f"case {index}: {status} {answer}\nschema: {json.dumps(schema)}"
        outcome = answer["status"]
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome == "completed":
            text = answer["output"][0]["content"][0]["text"]
            value = json.loads(text)  # raises: a completed answer that is not JSON
            jsonschema.validate(value, schema)  # raises: completed and not matching
        else:
            assert outcome == "incomplete", f"case {index}: {answer}\nschema: {json.dumps(schema)}"
            assert answer["incomplete_details"]["reason"] == "max_output_tokens"
    print(f"\nstructured property test: {CASES} schemas, outcomes {outcomes}")
    report = os.environ.get("AFM_SCHEMA_PROPERTY_REPORT")
    if report:
        Path(report).write_text(json.dumps({"cases": CASES, "outcomes": outcomes}) + "\n", encoding="utf-8")
