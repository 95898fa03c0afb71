# SPDX-License-Identifier: Apache-2.0
"""Validation of every answer against the pinned published schemas (Tests/schemas/README.md), with jsonschema.

    from schemas import check
    check("openai", "CreateChatCompletionResponse", body)

Responses events are validated against the schema of their own type (the union `ResponseStreamEvent` would accept
an event that matches any one of its members).
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"
FILES = {
    "openai": "openai-openapi.subset.json",
    "openresponses": "openresponses.json",
    "anthropic": "anthropic-messages.schema.json",
}


@lru_cache(maxsize=None)
def components(document: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / FILES[document]).read_text(encoding="utf-8"))["components"]


@lru_cache(maxsize=None)
def validator(document: str, name: str) -> jsonschema.protocols.Validator:
    parts = components(document)
    if name not in parts["schemas"]:
        raise AssertionError(f"{FILES[document]} has no schema {name}")
    schema = {"$ref": f"#/components/schemas/{name}", "components": parts}
    return jsonschema.Draft202012Validator(schema)


def check(document: str, name: str, value: Any) -> None:
    """Fails with every violation (path and message) when `value` does not match the schema."""
    errors = sorted(validator(document, name).iter_errors(value), key=lambda error: list(error.absolute_path))
    if errors:
        lines = [f"  at /{'/'.join(map(str, error.absolute_path))}: {error.message[:300]}" for error in errors[:10]]
        raise AssertionError(f"{FILES[document]} {name} rejects {json.dumps(value)[:400]}:\n" + "\n".join(lines))


@lru_cache(maxsize=None)
def event_schemas(document: str, union: str) -> dict[str, str]:
    """The member schema of a union of events for each event `type` (from the members' `type` enum)."""
    schemas = components(document)["schemas"]
    members = schemas[union].get("anyOf") or schemas[union].get("oneOf") or []
    by_type = {}
    for member in members:
        name = member["$ref"].rsplit("/", 1)[1]
        kinds = schemas[name].get("properties", {}).get("type", {}).get("enum", [])
        for kind in kinds:
            by_type[kind] = name
    return by_type


def check_response_event(event: dict[str, Any]) -> None:
    """A Responses stream event: OpenAI's schema of its type, and the Open Responses one (but for `error`, below)."""
    openai_event = {**event, "response": openai_view(event["response"])} if "response" in event else event
    check("openai", event_schemas("openai", "ResponseStreamEvent")[event["type"]], openai_event)
    # Open Responses nests the error event's fields in `error`; OpenAI's spec and SDK put them at top level, and the
    # SDK raises on any event with a truthy `error` key, so the gateway follows OpenAI there (docs/responses-api.md).
    if event["type"] != "error":
        check("openresponses", OPEN_RESPONSES_EVENTS[event["type"]], event)
    if "response" in event:
        check_response_object(event["response"])


def check_response_object(response: dict[str, Any]) -> None:
    check("openai", "Response", openai_view(response))
    check("openresponses", "ResponseResource", response)


def openai_view(response: dict[str, Any]) -> dict[str, Any]:
    """The one documented deviation from OpenAI's schema (docs/responses-api.md, "Published schemas"): a failed
    response's `error.code` is AFM's code (`backend_crashed`, `output_limit_exceeded`, …), which OpenAI's schema
    restricts to its own list; Open Responses allows any string. Everything else is validated as sent."""
    if isinstance(response.get("error"), dict):
        return {**response, "error": {**response["error"], "code": "server_error"}}
    return response


OPEN_RESPONSES_EVENTS = {
    "response.created": "ResponseCreatedStreamingEvent",
    "response.queued": "ResponseQueuedStreamingEvent",
    "response.in_progress": "ResponseInProgressStreamingEvent",
    "response.completed": "ResponseCompletedStreamingEvent",
    "response.failed": "ResponseFailedStreamingEvent",
    "response.incomplete": "ResponseIncompleteStreamingEvent",
    "response.output_item.added": "ResponseOutputItemAddedStreamingEvent",
    "response.output_item.done": "ResponseOutputItemDoneStreamingEvent",
    "response.content_part.added": "ResponseContentPartAddedStreamingEvent",
    "response.content_part.done": "ResponseContentPartDoneStreamingEvent",
    "response.output_text.delta": "ResponseOutputTextDeltaStreamingEvent",
    "response.output_text.done": "ResponseOutputTextDoneStreamingEvent",
    "response.function_call_arguments.delta": "ResponseFunctionCallArgumentsDeltaStreamingEvent",
    "response.function_call_arguments.done": "ResponseFunctionCallArgumentsDoneStreamingEvent",
    "response.reasoning.delta": "ResponseReasoningDeltaStreamingEvent",
    "response.reasoning.done": "ResponseReasoningDoneStreamingEvent",
}


def check_anthropic_event(name: str, data: dict[str, Any]) -> None:
    """An Anthropic stream event: `ping` is only `{"type":"ping"}`, `error` the error envelope, others the SDK's union."""
    assert data.get("type") == name, f"event {name} carries type {data.get('type')}"
    if name == "ping":
        assert data == {"type": "ping"}
    elif name == "error":
        check("anthropic", "ErrorResponse", data)
    else:
        check("anthropic", "RawMessageStreamEvent", data)
