# SPDX-License-Identifier: Apache-2.0
"""GET /metrics read by a real Prometheus text parser (PyPI prometheus-client) after known requests (issue 19)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import openai
from prometheus_client.parser import text_string_to_metric_families

USAGE = {"usage": {"input_tokens": 5, "output_tokens": 2, "reasoning_tokens": 0, "cached_tokens": 3}}
KEYS = "alice:sk-alice-metrics\nci:sk-ci-metrics\n"


def scrape(gw, key: str | None = "sk-alice-metrics"):
    request = urllib.request.Request(f"{gw.origin}/metrics")
    if key:
        request.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
        text = answer.read().decode("utf-8")
    assert text.endswith("\n")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    return text, families


def value(families, family: str, sample: str, **labels) -> float:
    matches = [
        s.value for s in families[family].samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, f"{sample}{labels}: {matches}"
    return matches[0]


def test_metrics_after_known_requests(gateway, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text(KEYS, encoding="utf-8")
    gw = gateway(
        models={"m": [{"text": "a"}, {"text": "b"}, USAGE], "fails": [{"text": "a"}, {"error": {"code": "internal", "message": "x"}}]},
        config=f"[Server]\nAPIKeyFile={keys}\n",
        api_key="sk-alice-metrics",
    )
    alice = openai.OpenAI(base_url=gw.base_url, api_key="sk-alice-metrics", timeout=30, max_retries=0)
    ci = openai.OpenAI(base_url=gw.base_url, api_key="sk-ci-metrics", timeout=30, max_retries=0)
    for _ in range(3):
        assert alice.responses.create(model="m", input="hi").output_text == "ab"
    with ci.responses.stream(model="m", input="hi") as stream:
        assert stream.get_final_response().output_text == "ab"
    try:
        alice.responses.create(model="fails", input="hi")
    except openai.InternalServerError:
        pass
    try:
        alice.responses.create(model="nope", input="hi")
        raise AssertionError("an unknown model must be refused")
    except openai.NotFoundError:
        pass
    bad = openai.OpenAI(base_url=gw.base_url, api_key="sk-wrong", timeout=30, max_retries=0)
    try:
        bad.responses.create(model="m", input="hi")
        raise AssertionError("a wrong key must be refused")
    except openai.AuthenticationError as error:
        assert error.status_code == 401
        assert error.body["code"] == "invalid_api_key"

    text, families = scrape(gw)
    labels = {"model": "m", "backend": "scripted"}
    assert value(families, "afm_prompt_tokens", "afm_prompt_tokens_total", **labels) == 20
    assert value(families, "afm_generation_tokens", "afm_generation_tokens_total", **labels) == 8
    assert value(families, "afm_cached_tokens", "afm_cached_tokens_total", **labels) == 12
    assert value(families, "afm_request_success", "afm_request_success_total", finished_reason="stop", **labels) == 4
    assert value(families, "afm_request_success", "afm_request_success_total", model="fails", finished_reason="error") == 1
    assert value(families, "afm_requests", "afm_requests_total", dialect="responses", code="200") == 4
    assert value(families, "afm_requests", "afm_requests_total", dialect="responses", code="500") == 1
    assert value(families, "afm_requests", "afm_requests_total", dialect="responses", code="404") == 1
    assert value(families, "afm_requests", "afm_requests_total", dialect="responses", code="401") == 1
    assert value(families, "afm_api_key_requests", "afm_api_key_requests_total", key="alice") == 5
    assert value(families, "afm_api_key_requests", "afm_api_key_requests_total", key="ci") == 1
    assert "sk-alice-metrics" not in text

    # Histograms: cumulative buckets ending in +Inf = _count, vLLM's bucket bounds, a sum.
    for name, bounds in [
        ("afm_time_to_first_token_seconds", 22),
        ("afm_time_per_output_token_seconds", 19),
        ("afm_e2e_request_latency_seconds", 21),
        ("afm_request_queue_seconds", 21),
    ]:
        family = families[name]
        assert family.type == "histogram"
        buckets = [s for s in family.samples if s.name == name + "_bucket" and s.labels["model"] == "m"]
        assert [s.labels["le"] for s in buckets][-1] == "+Inf"
        assert len(buckets) == bounds + 1
        counts = [s.value for s in buckets]
        assert counts == sorted(counts)
        assert counts[-1] == value(families, name, name + "_count", **labels)
    assert value(families, "afm_e2e_request_latency_seconds", "afm_e2e_request_latency_seconds_count", **labels) == 4
    assert value(families, "afm_time_to_first_token_seconds", "afm_time_to_first_token_seconds_count", **labels) == 4
    # Two output tokens each: one time-per-token observation per request.
    assert value(families, "afm_time_per_output_token_seconds", "afm_time_per_output_token_seconds_count", **labels) == 4
    assert value(families, "afm_e2e_request_latency_seconds", "afm_e2e_request_latency_seconds_sum", **labels) > 0
    first = [s for s in families["afm_time_to_first_token_seconds"].samples if s.labels.get("le") == "0.001"]
    assert first, "vLLM's first bucket bound 0.001 is missing"

    # Gauges of the backend and the load.
    assert families["afm_backend_up"].type == "gauge"
    assert value(families, "afm_backend_up", "afm_backend_up", backend="scripted") == 1
    assert value(families, "afm_backend_generation", "afm_backend_generation", backend="scripted") == 1
    assert value(families, "afm_backend_restarts", "afm_backend_restarts_total", backend="scripted") == 0
    assert value(families, "afm_requests_running", "afm_requests_running", backend="scripted") == 0
    assert value(families, "afm_requests_waiting", "afm_requests_waiting", backend="scripted") == 0
    assert value(families, "afm_draining", "afm_draining") == 0

    # Every family has HELP and TYPE before its first sample.
    lines = text.splitlines()
    for family in families.values():
        help_index = lines.index(next(line for line in lines if line.startswith(f"# HELP {family.name}")))
        assert lines[help_index + 1].startswith(f"# TYPE {family.name}")

    # The key is required for /metrics by default.
    try:
        scrape(gw, key=None)
        raise AssertionError("/metrics without a key must be refused while keys are configured")
    except urllib.error.HTTPError as error:
        assert error.code == 401
        assert json.loads(error.read())["error"]["code"] == "invalid_api_key"
