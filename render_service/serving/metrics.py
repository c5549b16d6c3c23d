"""Prometheus metrics of the service, safe with several worker processes.

With ``PROMETHEUS_MULTIPROC_DIR`` set (the CLI sets it to a fresh temporary folder when it runs
more than one worker process), prometheus-client writes each process's values to files there and
:func:`exposition` aggregates them: counters and histograms are summed, the live gauges summed over
live processes (``livesum``) or maxed (``livemax``). Without it, the default registry is used.

Metric names (all prefixed ``render_service_``):

* ``requests_total{endpoint,method,status}``, ``request_duration_seconds{endpoint,method,status}``
* ``requests_in_flight{endpoint}``
* ``worker_threads``, ``worker_busy_threads``, ``worker_queued_requests`` (sums over processes),
  ``worker_saturation`` (busiest process: (busy + queued) / threads; 1 = every thread busy)
* ``tokens_rendered_total{endpoint}``, ``tokens_derendered_total{endpoint}``
* ``cache_lookups_total{cache,result}`` (``result`` = ``hit``/``miss``), fed through
  :func:`register_cache`.
"""

from __future__ import annotations

import glob
import os
import threading
import weakref
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

PREFIX = "render_service_"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)

REQUESTS = Counter(PREFIX + "requests", "HTTP requests answered.", ["endpoint", "method", "status"])
LATENCY = Histogram(PREFIX + "request_duration_seconds", "Time from request start to response end.",
                    ["endpoint", "method", "status"], buckets=LATENCY_BUCKETS)
IN_FLIGHT = Gauge(PREFIX + "requests_in_flight", "Requests being handled.", ["endpoint"],
                  multiprocess_mode="livesum")
THREADS = Gauge(PREFIX + "worker_threads", "Worker threads for CPU work.", multiprocess_mode="livesum")
BUSY = Gauge(PREFIX + "worker_busy_threads", "Worker threads running a request.",
             multiprocess_mode="livesum")
QUEUED = Gauge(PREFIX + "worker_queued_requests", "Requests waiting for a worker thread.",
               multiprocess_mode="livesum")
SATURATION = Gauge(PREFIX + "worker_saturation",
                   "(busy + queued) / threads of the busiest process; above 1 means requests wait.",
                   multiprocess_mode="livemax")
TOKENS_RENDERED = Counter(PREFIX + "tokens_rendered", "Token ids produced by render/tokenize.",
                          ["endpoint"])
TOKENS_DERENDERED = Counter(PREFIX + "tokens_derendered", "Token ids consumed by derender/detokenize.",
                            ["endpoint"])
CACHE = Counter(PREFIX + "cache_lookups", "Cache lookups by cache and result.", ["cache", "result"])


def multiprocess_dir() -> str | None:
    """The multiprocess folder in force, or ``None`` in single-process mode."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def exposition() -> tuple[bytes, str]:
    """The Prometheus text body and its content type, aggregated over worker processes."""
    fold_tallies()
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def forget_dead_processes() -> list[int]:
    """Drop live-gauge files of worker processes that no longer exist (a crashed worker).

    Called by each worker at start-up, so a replaced worker's in-flight and queue gauges stop
    counting. Returns the pids that were dropped.
    """
    folder = multiprocess_dir()
    if not folder:
        return []
    dead = set()
    for path in glob.glob(os.path.join(folder, "gauge_live*_*.db")):
        pid = int(path.rsplit("_", 1)[1].split(".")[0])
        if not _alive(pid):
            dead.add(pid)
    for pid in dead:
        multiprocess.mark_process_dead(pid, folder)
    return sorted(dead)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def set_pool(threads: int, busy: int, queued: int) -> None:
    """Publish the worker pool's size and load."""
    THREADS.set(threads)
    BUSY.set(busy)
    QUEUED.set(queued)
    SATURATION.set((busy + queued) / max(1, threads))


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Handle a cache uses to count its lookups: ``stats.hit()``, ``stats.miss(n)``.

    The two series are looked up once (``labels`` costs ~3 µs a call) and a count of 0 is not
    added (``inc(0)`` changes nothing but takes the value's lock): a cache reports both counts
    after every lookup."""

    name: str
    _hits: Any = field(init=False, repr=False, compare=False)
    _misses: Any = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hits", CACHE.labels(self.name, "hit"))
        object.__setattr__(self, "_misses", CACHE.labels(self.name, "miss"))

    def hit(self, n: int = 1) -> None:
        """Count ``n`` hits."""
        if n:
            self._hits.inc(n)

    def miss(self, n: int = 1) -> None:
        """Count ``n`` misses."""
        if n:
            self._misses.inc(n)


def register_cache(name: str) -> CacheStats:
    """Hook for caches (e.g. a prefix cache): returns the handle that counts its hits and misses.

    Both series start at 0 so dashboards see the cache before its first lookup.
    """
    CACHE.labels(name, "hit").inc(0)
    CACHE.labels(name, "miss").inc(0)
    return CacheStats(name)


TOKEN_KEYS_OUT = ("token_ids", "tokens")
"""Keys whose list lengths count as tokens: ``token_ids`` (GenerateRequest, generate responses
and chunks) and ``tokens`` (tokenize/detokenize). ``prompt_token_ids`` is deliberately not one."""


def count_tokens(value: Any, depth: int = 0) -> int:
    """Sum the lengths of integer lists under the keys in :data:`TOKEN_KEYS_OUT`, anywhere in ``value``.

    Generic over the wire shapes: a render response (``token_ids``), a list of them (completions),
    a derender request (``generate_response.choices[].token_ids``, ``generate_chunk...``) or a
    tokenize response (``tokens``). Depth is bounded at 8 levels. A list of plain integers (a
    9k-token prompt's ids, offsets) is recognised at C speed rather than walked item by item.
    """
    if depth > 8:
        return 0
    if isinstance(value, dict):
        total = 0
        for key, item in value.items():
            if key in TOKEN_KEYS_OUT and isinstance(item, list):
                total += len(item) if _all_ints(item) else sum(1 for t in item if isinstance(t, int))
            elif isinstance(item, dict | list):
                total += count_tokens(item, depth + 1)
        return total
    if isinstance(value, list):
        if len(value) > 64 and _all_ints(value):  # ids or offsets: no dict or list inside
            return 0
        return sum(count_tokens(item, depth + 1) for item in value if isinstance(item, dict | list))
    return 0


def _all_ints(items: list[Any]) -> bool:
    """Whether every item is an ``int`` (``bool`` included, as ``isinstance``) within 64 bits."""
    try:
        array("q", items)
    except (TypeError, OverflowError):
        return False
    return True


class AnswerTally:
    """The request metrics of one endpoint's ``POST`` answers with status 200 (``requests_total``,
    ``request_duration_seconds``, ``requests_in_flight``, ``tokens_derendered_total``), kept as
    plain numbers and folded into those series when they are read (:func:`exposition`), for the
    fast lane, whose per-call work is a few tens of µs (five prometheus-client updates, each
    taking a lock, cost about 6 µs of it).

    The series are created when the tally is (so they appear in ``/metrics`` exactly when direct
    updates would have created them) and read the same after folding: counts and bucket counts
    are exact; the latency sum is added once per fold instead of once per request (the same
    value up to float rounding). Thread-safe (one lock; a process may run several servers, e.g.
    tests, and any of them may read ``/metrics``). In multiprocess mode
    (``PROMETHEUS_MULTIPROC_DIR``) another process may serve ``/metrics``, so every update is
    folded at once (direct updates).
    """

    __slots__ = ("requests", "in_flight", "latency", "buckets", "tokens", "_series", "_direct",
                 "_lock", "__weakref__")

    def __init__(self, endpoint: str, tokens_counter: Counter | None = None) -> None:
        in_flight, requests = IN_FLIGHT.labels(endpoint), REQUESTS.labels(endpoint, "POST", "200")
        latency = LATENCY.labels(endpoint, "POST", "200")
        tokens = (tokens_counter or TOKENS_DERENDERED).labels(endpoint)  # the render lane: TOKENS_RENDERED
        self._series = (in_flight, requests, latency, tokens)
        # bulk bucket updates need the histogram child's value cells (prometheus-client >= 0.20)
        self._direct = bool(multiprocess_dir()) or not (
            hasattr(latency, "_buckets") and hasattr(latency, "_sum")
            and len(latency._buckets) == len(_BOUNDS))
        self.requests = self.in_flight = self.tokens = 0
        self.latency = 0.0
        self.buckets = [0] * len(_BOUNDS)
        self._lock = threading.Lock()
        _TALLIES.add(self)

    def started(self) -> None:
        """One request of this endpoint began."""
        with self._lock:
            self.in_flight += 1
            if self._direct:
                self._fold()

    def answered(self, seconds: float, tokens: int) -> None:
        """That request's answer was sent, ``seconds`` after it began, derendering ``tokens`` ids."""
        with self._lock:
            self.in_flight -= 1
            self.requests += 1
            self.latency += seconds
            self.buckets[bisect_left(_BOUNDS, seconds)] += 1  # the first bucket with seconds <= le
            self.tokens += tokens
            if self._direct:
                self._fold()

    def left(self) -> None:
        """That request ended without a 200 answer from this tally's caller (another status, counted
        by the caller, or handed to the full app, which counts it)."""
        with self._lock:
            self.in_flight -= 1
            if self._direct:
                self._fold()

    def fold(self) -> None:
        """Add what was counted since the last fold to the prometheus series."""
        with self._lock:
            self._fold()

    def _fold(self) -> None:
        in_flight, requests, latency, tokens = self._series
        if self.in_flight:
            in_flight.inc(self.in_flight)
            self.in_flight = 0
        if self.requests:
            requests.inc(self.requests)
            tokens.inc(self.tokens)
            if self._direct:
                latency.observe(self.latency)  # one request per fold here
            else:
                latency._sum.inc(self.latency)
                for cell, count in zip(latency._buckets, self.buckets, strict=True):
                    if count:
                        cell.inc(count)
            self.requests = self.tokens = 0
            self.latency = 0.0
            self.buckets = [0] * len(_BOUNDS)


_BOUNDS = (*LATENCY_BUCKETS, float("inf"))
_TALLIES: weakref.WeakSet[AnswerTally] = weakref.WeakSet()


def fold_tallies() -> None:
    """Fold every live :class:`AnswerTally` into its series (before the metrics are read)."""
    for tally in list(_TALLIES):
        tally.fold()
