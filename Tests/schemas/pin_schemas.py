# SPDX-License-Identifier: Apache-2.0
"""Writes the pinned schemas the client tests validate every answer against (Tests/schemas/README.md).

    python3 Tests/schemas/pin_schemas.py OPENAI_OPENAPI_JSON OPENRESPONSES_OPENAPI_JSON

Each published document is cut down to the component schemas the gateway's answers must match and everything they
reference, with the source (repository, commit, file, sha256 of the file) recorded in `x-afm-source`, so the pinned
file is small, exact, and can be regenerated and compared. OpenAPI's `nullable: true` becomes JSON Schema's
`null` type, since the validator (jsonschema, Draft 2020-12) does not know `nullable`.

The Anthropic schema is derived from the pinned `anthropic` SDK's own response types (Anthropic publishes no
OpenAPI document in a public repository): run with the test virtualenv's python and `--anthropic` to write it.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

OPENAI_ROOTS = [
    "CreateChatCompletionResponse", "CreateChatCompletionStreamResponse", "ErrorResponse", "ListModelsResponse", "Model",
    "Response", "ResponseStreamEvent",
]
OPENAI_SOURCE = {"repository": "openai/openai-openapi", "commit": "f85dbe223d40e1a31cba812ab2d755c7e98a92a3", "file": "openapi.json"}
OPENRESPONSES_SOURCE = {
    "repository": "openresponses/openresponses (mirror Stars1233/openresponses)",
    "commit": "92c12d96d7b61d6d15e2214daa5e9c6000ab6e1c",
    "file": "public/openapi/openapi.json",
}


def references(node, found: set[str]) -> None:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
            found.add(ref.rsplit("/", 1)[1])
        for value in node.values():
            references(value, found)
    elif isinstance(node, list):
        for value in node:
            references(value, found)


def closure(schemas: dict, roots: list[str]) -> dict:
    todo, kept = list(roots), {}
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept[name] = schemas[name]
        found: set[str] = set()
        references(kept[name], found)
        todo.extend(sorted(found - kept.keys()))
    return {name: kept[name] for name in sorted(kept)}


def without_nullable(node):
    """OpenAPI's `nullable: true` as JSON Schema: `null` added to `type`, or an `anyOf` with `{"type":"null"}`."""
    if isinstance(node, list):
        return [without_nullable(value) for value in node]
    if not isinstance(node, dict):
        return node
    node = {key: without_nullable(value) for key, value in node.items()}
    if node.pop("nullable", False) is True:
        kind = node.get("type")
        if isinstance(kind, str):
            node["type"] = [kind, "null"]
            if "enum" in node and None not in node["enum"]:
                node["enum"] = node["enum"] + [None]
        elif isinstance(kind, list):
            node["type"] = kind if "null" in kind else kind + ["null"]
        else:
            node = {"anyOf": [node, {"type": "null"}]}
    return node


def pin(source_path: str, source: dict, roots: list[str] | None, out: str) -> None:
    data = Path(source_path).read_bytes()
    document = json.loads(data)
    schemas = document["components"]["schemas"]
    kept = closure(schemas, roots or sorted(schemas))
    pinned = {
        "x-afm-source": {**source, "sha256": hashlib.sha256(data).hexdigest(), "openapi": document.get("openapi")},
        "components": {"schemas": without_nullable(kept)},
    }
    (HERE / out).write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
    print(f"{out}: {len(kept)} schemas")


def pin_anthropic() -> None:
    import anthropic
    import pydantic
    from anthropic.types import ErrorResponse, Message, MessageTokensCount, ModelInfo, RawMessageStreamEvent

    schemas = {}
    for name, kind in [
        ("Message", Message), ("RawMessageStreamEvent", RawMessageStreamEvent), ("MessageTokensCount", MessageTokensCount),
        ("ErrorResponse", ErrorResponse), ("ModelInfo", ModelInfo),
    ]:
        schema = pydantic.TypeAdapter(kind).json_schema(ref_template="#/components/schemas/{model}")
        for sub, definition in schema.pop("$defs", {}).items():
            schemas[sub] = definition
        schemas[name] = schema
    pinned = {
        "x-afm-source": {"package": "anthropic", "version": anthropic.__version__, "derived": "pydantic TypeAdapter(...).json_schema()"},
        "components": {"schemas": {name: schemas[name] for name in sorted(schemas)}},
    }
    (HERE / "anthropic-messages.schema.json").write_text(json.dumps(pinned, indent=1, sort_keys=True) + "\n")
    print(f"anthropic-messages.schema.json: {len(schemas)} schemas")


if __name__ == "__main__":
    if sys.argv[1:] == ["--anthropic"]:
        pin_anthropic()
    else:
        pin(sys.argv[1], OPENAI_SOURCE, OPENAI_ROOTS, "openai-openapi.subset.json")
        pin(sys.argv[2], OPENRESPONSES_SOURCE, None, "openresponses.json")
