"""Prometheus metrics of the gateway (prefix ``render_service_gateway_``), multiprocess-safe like
:mod:`render_service.serving.metrics`.

* ``time_to_first_token_seconds{endpoint}``: request arrival → first chunk with output sent.
* ``inter_token_latency_seconds{endpoint}``: gap between consecutive output chunks of a stream.
* ``engine_call_seconds{pool,mode}``: one engine call (``mode`` ``json`` or ``stream``), start to end.
* ``engine_errors_total{pool,kind}``: ``unreachable``, ``timeout``, ``rejected`` (4xx), ``failed``
  (5xx, bad answer), ``stream`` (broken or error event mid-stream), ``abort`` (abort call failed).
* ``engine_aborts_total{pool,reason}``: ``stop_string``, ``client_disconnect`` or ``error``.
* ``streams_open``: client streams whose in-memory state is alive (sum over processes).
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from ..metrics import LATENCY_BUCKETS, PREFIX

GATEWAY = PREFIX + "gateway_"
TOKEN_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.5, 5, 10)

TTFT = Histogram(GATEWAY + "time_to_first_token_seconds", "Request arrival to the first output chunk sent.",
                 ["endpoint"], buckets=TOKEN_BUCKETS)
ITL = Histogram(GATEWAY + "inter_token_latency_seconds", "Gap between consecutive output chunks.",
                ["endpoint"], buckets=TOKEN_BUCKETS)
ENGINE_CALL = Histogram(GATEWAY + "engine_call_seconds", "Duration of one engine call, by pool.",
                        ["pool", "mode"], buckets=LATENCY_BUCKETS + (60, 120, 300, 600))
ENGINE_ERRORS = Counter(GATEWAY + "engine_errors", "Failed engine calls, by pool and kind.", ["pool", "kind"])
ABORTS = Counter(GATEWAY + "engine_aborts", "Engine requests aborted, by pool and reason.",
                 ["pool", "reason"])
STREAMS = Gauge(GATEWAY + "streams_open", "Client streams holding in-memory derender state.",
                multiprocess_mode="livesum")
