"""The fast lane's :class:`AnswerTally` (plain numbers folded into the prometheus series when
``/metrics`` is read) exports what direct prometheus-client updates would: the same samples, the
same counts and bucket counts, the latency sum up to float rounding, in-flight requests counted
while they are open; and in multiprocess mode it updates the series directly."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from render_service.serving import metrics
from render_service.serving.metrics import LATENCY_BUCKETS, AnswerTally, exposition, fold_tallies

_SERIAL = itertools.count()
LATENCIES = st.lists(
    st.one_of(st.floats(0, 40, allow_nan=False), st.sampled_from(LATENCY_BUCKETS)), max_size=30)


def _ours(endpoint: str) -> dict[tuple[str, str], float]:
    """Our registry's samples of ``endpoint`` (name, le) -> value, after a fold."""
    fold_tallies()
    out = {}
    for metric in (metrics.REQUESTS, metrics.LATENCY, metrics.IN_FLIGHT, metrics.TOKENS_DERENDERED):
        for s in next(iter(metric.collect())).samples:
            if s.labels.get("endpoint") == endpoint and not s.name.endswith("_created"):
                out[(s.name, s.labels.get("le", ""))] = s.value
    return out


def _direct(calls: list[tuple[float, int]], open_requests: int) -> dict[tuple[str, str], float]:
    """The same samples from a private registry updated per request, as the lane did before."""
    reg = CollectorRegistry()
    p = "render_service_"
    requests = Counter(p + "requests", "", ["endpoint", "method", "status"], registry=reg)
    latency = Histogram(p + "request_duration_seconds", "", ["endpoint", "method", "status"],
                        buckets=LATENCY_BUCKETS, registry=reg)
    in_flight = Gauge(p + "requests_in_flight", "", ["endpoint"], registry=reg)
    tokens = Counter(p + "tokens_derendered", "", ["endpoint"], registry=reg)
    e = "e"
    in_flight.labels(e).inc(open_requests)
    r, lat, t = requests.labels(e, "POST", "200"), latency.labels(e, "POST", "200"), tokens.labels(e)
    for seconds, n in calls:
        r.inc()
        lat.observe(seconds)
        t.inc(n)
    out = {}
    for family in reg.collect():
        for s in family.samples:
            if not s.name.endswith("_created"):
                out[(s.name, s.labels.get("le", ""))] = s.value
    return out


def _forget(endpoint: str) -> None:
    """Drop the test endpoint's series (the registry stays small across examples)."""
    for metric, labels in ((metrics.REQUESTS, (endpoint, "POST", "200")),
                           (metrics.LATENCY, (endpoint, "POST", "200")),
                           (metrics.IN_FLIGHT, (endpoint,)), (metrics.TOKENS_DERENDERED, (endpoint,))):
        metric.remove(*labels)


@settings(max_examples=40)
@given(LATENCIES, st.lists(st.integers(0, 16), min_size=30, max_size=30), st.integers(0, 3),
       st.integers(0, 30))
def test_folded_tally_exports_what_direct_updates_would(latencies, tokens, open_requests, fold_at):
    endpoint = f"/tally-test-{next(_SERIAL)}"
    tally = AnswerTally(endpoint)
    calls = list(zip(latencies, tokens, strict=False))
    for i, (seconds, n) in enumerate(calls):
        if i == fold_at:
            exposition()  # a scrape in the middle folds what was counted so far
        tally.started()
        tally.answered(seconds, n)
    for _ in range(open_requests):  # requests still being answered at scrape time
        tally.started()
    ours, direct = _ours(endpoint), _direct(calls, open_requests)
    assert ours.keys() == direct.keys()
    for key, value in direct.items():
        if key[0].endswith("_sum"):
            assert abs(ours[key] - value) <= 1e-9 * max(1.0, value), key
        else:
            assert ours[key] == value, key
    for _ in range(open_requests):
        tally.answered(0.001, 0)
    assert _ours(endpoint)[("render_service_requests_in_flight", "")] == 0
    tally.started()
    tally.answered(0.002, 1)  # counted only in the tally until the exposition folds it
    text = exposition()[0].decode()
    line = f'render_service_requests_total{{endpoint="{endpoint}",method="POST",status="200"}}'
    assert f"{line} {float(len(calls) + open_requests + 1)}" in text.splitlines()
    _forget(endpoint)


def test_multiprocess_mode_updates_the_series_at_once(monkeypatch, tmp_path):
    """With ``PROMETHEUS_MULTIPROC_DIR`` another process may serve /metrics: nothing waits for a fold."""
    endpoint = f"/tally-test-{next(_SERIAL)}"
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    tally = AnswerTally(endpoint)
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    tally.started()
    tally.answered(0.003, 2)
    latency = metrics.LATENCY.labels(endpoint, "POST", "200")
    assert metrics.REQUESTS.labels(endpoint, "POST", "200")._value.get() == 1
    assert metrics.TOKENS_DERENDERED.labels(endpoint)._value.get() == 2
    assert latency._sum.get() == 0.003 and tally.requests == 0
    _forget(endpoint)
