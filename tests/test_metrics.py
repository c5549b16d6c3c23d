"""Observability: request ids, config fingerprint, Prometheus metrics, JSON access log, /ready."""

from __future__ import annotations

import logging
import re

from conftest import shared_bundle
from prometheus_client.parser import text_string_to_metric_families

from render_service.fingerprint import config_fingerprint
from render_service.serving.logging_setup import ACCESS_LOGGER, JsonFormatter
from render_service.serving.metrics import count_tokens, register_cache
from render_service.settings import Settings


def samples(client) -> dict[tuple[str, tuple], float]:
    """/metrics as {(sample name, sorted labels): value}."""
    text = client.get("/metrics").text
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_request_id_is_echoed_or_generated(serve):
    """A client X-Request-Id is echoed; without one (or with an unusable one) a fresh hex id is set."""
    client = serve()
    assert client.get("/v1/models", headers={"X-Request-Id": "abc-123"}).headers["x-request-id"] == "abc-123"
    ids = {client.get("/health").headers["x-request-id"] for _ in range(3)}
    assert len(ids) == 3 and all(re.fullmatch(r"[0-9a-f]{32}", i) for i in ids)
    bad = client.get("/health", headers={"X-Request-Id": "x" * 300}).headers["x-request-id"]
    assert re.fullmatch(r"[0-9a-f]{32}", bad)


def test_fingerprint_header_on_every_response_matches_models(serve):
    """X-Render-Config-Fingerprint is on success, error and unknown-path responses and equals the
    `config_fingerprint` field of each /v1/models card."""
    client = serve()
    fp = client.get("/v1/models").json()["data"][0]["config_fingerprint"]
    assert len(fp) == 64 and int(fp, 16) >= 0  # sha256 hex
    for r in (client.get("/health"), client.get("/nope"),
              client.post("/v1/chat/completions/render", content=b"{",
                          headers={"content-type": "application/json"})):
        assert r.headers["x-render-config-fingerprint"] == fp


def test_fingerprint_changes_with_output_relevant_settings():
    """Parser names, auto tool choice, template kwargs and served names change the fingerprint;
    settings that do not change output (port, limits) do not."""
    bundle = shared_bundle(Settings())  # the test process's bundle of the embedded model
    base = config_fingerprint(bundle, Settings())
    assert config_fingerprint(bundle, Settings(port=1234, max_n=3, api_keys=("k",))) == base
    changed = [
        Settings(reasoning_parser="qwen3"),
        Settings(tool_call_parser="hermes"),
        Settings(tool_call_parser="hermes", enable_auto_tool_choice=True),
        Settings(default_chat_template_kwargs={"enable_thinking": False}),
    ]
    prints = {config_fingerprint(bundle, s) for s in changed}
    assert base not in prints and len(prints) == len(changed)


def test_request_metrics_count_by_endpoint_and_status(serve):
    """requests_total and the latency histogram grow per endpoint/method/status; unknown paths are
    folded into endpoint="other"."""
    client = serve()
    before = samples(client)
    client.get("/v1/models")
    client.get("/v1/models")
    client.get("/does-not-exist-123")
    client.post("/v1/chat/completions/render", content=b"{", headers={"content-type": "application/json"})
    after = samples(client)

    def delta(name, **labels):
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert delta("render_service_requests_total", endpoint="/v1/models", method="GET", status="200") == 2
    assert delta("render_service_requests_total", endpoint="other", method="GET", status="404") == 1
    assert delta("render_service_requests_total", endpoint="/v1/chat/completions/render",
                 method="POST", status="400") == 1
    assert delta("render_service_request_duration_seconds_count", endpoint="/v1/models",
                 method="GET", status="200") == 2
    assert not any("does-not-exist" in str(k) for k in after)


def test_pool_and_in_flight_gauges_are_exported(serve):
    """The worker pool size, busy/queued gauges, saturation and in-flight gauge are exported;
    idle between requests."""
    client = serve(renderer_threads=3)
    client.get("/health")
    s = samples(client)
    assert s[("render_service_worker_threads", ())] == 3
    assert s[("render_service_worker_busy_threads", ())] == 0
    assert s[("render_service_worker_queued_requests", ())] == 0
    assert s[("render_service_worker_saturation", ())] == 0
    assert s[("render_service_requests_in_flight", (("endpoint", "/metrics"),))] == 1  # this scrape


def test_cache_registration_hook_exports_hits_and_misses(serve):
    """register_cache(name) makes hit/miss series appear at 0 and counts what the cache reports."""
    stats = register_cache("test_prefix")
    stats.hit(3)
    stats.miss()
    s = samples(serve())
    assert s[("render_service_cache_lookups_total", (("cache", "test_prefix"), ("result", "hit")))] >= 3
    assert s[("render_service_cache_lookups_total", (("cache", "test_prefix"), ("result", "miss")))] >= 1


def test_count_tokens_is_generic_over_wire_shapes():
    """Token ids are counted under `token_ids`/`tokens` at any depth: render results, lists of
    them, derender requests; `prompt_token_ids` and non-int entries are not counted."""
    assert count_tokens({"token_ids": [1, 2, 3], "prompt_token_ids": [9] * 50}) == 3
    assert count_tokens([{"token_ids": [1, 2]}, {"token_ids": [3]}]) == 3
    derender = {"generate_chunk": {"choices": [{"token_ids": [5, 6]}]}, "prompt_token_ids": [1] * 9}
    assert count_tokens(derender) == 2
    assert count_tokens({"tokens": [1, 2, "x"]}) == 2
    assert count_tokens({"a": [[{"token_ids": [1]}]]}) == 1
    assert count_tokens("nope") == 0


def test_access_log_is_one_json_line_per_request(serve, caplog):
    """Each request logs one access record with request id, method, path, status and duration;
    the JSON formatter renders it as a single JSON object."""
    client = serve()
    with caplog.at_level(logging.INFO, logger=ACCESS_LOGGER):
        client.get("/health", headers={"X-Request-Id": "log-me-1"})
    records = [r for r in caplog.records if r.name == ACCESS_LOGGER and r.request_id == "log-me-1"]
    assert len(records) == 1
    import orjson

    line = JsonFormatter().format(records[0])
    entry = orjson.loads(line)
    assert "\n" not in line
    assert entry["method"] == "GET" and entry["path"] == "/health" and entry["status"] == 200
    assert entry["request_id"] == "log-me-1" and entry["duration_ms"] >= 0


def test_ready_and_health(serve):
    """/ready is 200 with the fingerprint once loaded; /health is 200 with an empty body."""
    client = serve()
    r = client.get("/ready")
    assert r.status_code == 200 and r.json()["status"] == "ready"
    h = client.get("/health")
    assert h.status_code == 200 and h.content == b""
