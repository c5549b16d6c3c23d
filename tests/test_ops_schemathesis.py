"""Schema-driven fuzzing (schemathesis) of the live server against its own OpenAPI spec.

Every operation in /openapi.json gets generated requests whose bodies follow the real request
models (:mod:`render_service.serving.openapi`). No response may be a 5xx, and every JSON error body
has the upstream shape. Two servers are fuzzed: the plain one and one with parsers
(``--reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice``).

Examples per operation: ``RENDER_FUZZ_EXAMPLES`` (default 200). With schemathesis' coverage phase
and both servers that is well over 5,000 generated POST requests. One test per operation, so
xdist spreads them; both servers serve the same /openapi.json
(``test_the_fuzzed_operations_are_all_of_the_schema`` checks), so each generated request is drawn
once and sent to both servers (drawing is most of the cost: drawing it once per server drew the
same requests twice). Each test counts what it sent per server (printed with ``-s``) and fails if
its operation was not fuzzed on either. Run by hand with a larger value for a deeper search.

Under the derandomized ``ci`` profile the drawn requests are the same on every run, so they are
recorded (:data:`CORPUS`, ``tools/record_fuzz_requests.py``) and sent as recorded while what they
depend on is unchanged (:func:`corpus_key`); one operation (:data:`LIVE_ALWAYS`) is drawn live on
every run and must equal its recording. Another key, profile or example count draws live.
"""

from __future__ import annotations

import functools
import hashlib
import http.client
import importlib.metadata
import json
import lzma
import os
import socketserver
import sys
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgpack
import orjson
import pytest
import requests
import schemathesis
from conftest import PROFILE, examples
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import FlakyStrategyDefinition
from hypothesis.internal.compat import add_note
from hypothesis.internal.conjecture import choice as hypothesis_choice
from hypothesis.internal.conjecture import providers as hypothesis_providers
from hypothesis.internal.conjecture import data as hypothesis_data
from hypothesis.strategies._internal import lazy as hypothesis_lazy
from hypothesis.internal.constants_ast import Constants, constants_from_module
from hypothesis.internal.floats import float_to_int
from hypothesis.strategies._internal import strategies as hypothesis_strategies
from openapi_spec_validator import validate
from schemathesis.core import NotSet
from schemathesis.core.transport import DEFAULT_RESPONSE_TIMEOUT
from schemathesis.generation import GenerationMode
from sortedcontainers import SortedSet

POST_ROUTES = ("/v1/chat/completions/render", "/v1/completions/render", "/v1/chat/completions/derender",
               "/v1/completions/derender", "/tokenize", "/detokenize")
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
EXAMPLES = int(os.environ.get("RENDER_FUZZ_EXAMPLES", str(examples(200))))
#: The two fuzzed servers: (name, settings); every generated request goes to both.
SERVERS: tuple[tuple[str, dict[str, Any]], ...] = (("plain", {}), ("parsers", PARSERS))


@pytest.fixture(scope="session")
def api_schema(serve):
    """The OpenAPI schema of both fuzzed servers (read from the plain one; the parsers server serves
    the same document)."""
    return schemathesis.openapi.from_url(f"{serve().base_url}/openapi.json")


#: Every operation of /openapi.json (``test_the_fuzzed_operations_are_all_of_the_schema`` checks
#: this list against the live schema). Each gets its own fuzz test per server, so xdist spreads them.
OPERATIONS = tuple(("POST", path) for path in (
    "/v1/chat/completions/render", "/v1/completions/render", "/v1/messages/render", "/v1/responses/render",
    "/v1/chat/completions/derender", "/v1/completions/derender", "/v1/messages/derender",
    "/v1/responses/derender", "/tokenize", "/detokenize")) + tuple(
    ("GET", path) for path in ("/health", "/ready", "/metrics", "/v1/models"))
_SESSION = requests.Session()
"""The requests session whose default headers every generated request carries (:func:`_prepared`
builds what ``case.call(session=_SESSION)`` sends; ``test_the_lean_client_sends_what_case_call_sends``
compares the two on the wire). ``trust_env`` off: the requests go to 127.0.0.1 directly, never
through a proxy named in the environment."""
_SESSION.trust_env = False
_PREPARE = requests.Session()
"""Prepares the requests :func:`_check` sends: schemathesis' requests transport empties the
session's headers while it sends (it has merged them into the request's own, at a lower
priority), so this session has none; ``trust_env`` off as :data:`_SESSION`'s."""
_PREPARE.headers = {}  # type: ignore[assignment]
_PREPARE.trust_env = False
DUMP = os.environ.get("RENDER_FUZZ_DUMP")
"""A file: when set, every generated request and the status it got is appended to it (one line
each; :func:`_drawn`), to compare the requests of two runs. Unset (the default): nothing is written."""
CORPUS = Path(__file__).resolve().parent / "goldens" / "fuzz_requests.msgpack.xz"
"""The requests the fuzz tests draw, as sent (``tools/record_fuzz_requests.py`` records them by
running the fuzz tests with :data:`RECORD_TO`): ``{"key": corpus key, "requests": {"METHOD /path":
[[case method, case path, method, request target, body, headers], ...]}, "constants": the local
constants they were drawn with (:func:`_draw_constants`)}``, msgpack, xz-compressed.

Under the ``ci`` profile hypothesis is derandomized: a fuzz test draws the same requests, in the
same order, on every run as long as the schema, this module, the example count and the libraries
that draw and prepare them are the same (:func:`corpus_key`). When the recorded key is this run's,
a fuzz test sends the recorded requests instead of drawing them again (drawing is three quarters of
a fuzz test's CPU), to both servers, with the same checks; :data:`LIVE_ALWAYS` is drawn live on
every run and must draw exactly what is recorded for it. Any other key (a changed route, model or
library; another profile or ``RENDER_FUZZ_EXAMPLES``): every fuzz test draws live, as without a
corpus, and warns that the corpus is stale."""
RECORD_TO = os.environ.get("RENDER_FUZZ_RECORD")
"""A folder: when set, every fuzz test draws live and writes the requests it drew to
``<folder>/<METHOD path>.msgpack`` with the corpus key (what ``tools/record_fuzz_requests.py``
merges into :data:`CORPUS`). Unset (the default): nothing is written."""
LIVE_ALWAYS = ("POST", "/detokenize")
"""The operation drawn live on every run and compared with its recorded requests (the cheapest
POST operation to draw: ~230 requests), so a corpus that no longer is what the tests draw fails."""
KEY_LIBRARIES = ("hypothesis", "schemathesis", "requests", "urllib3", "jsonschema-rs", "hypothesis-jsonschema")
_RECORDING: list[tuple[Any, ...]] | None = None
"""While a fuzz test draws live and records: the requests it sent, as :data:`CORPUS` holds them."""


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "-"


def corpus_key(spec: bytes) -> str:
    """What the drawn requests depend on, as a sha256: the served ``/openapi.json`` (``spec``, its
    JSON with sorted keys), this module's source, the example count and profile, the Python minor
    version, the active hypothesis settings and the versions of :data:`KEY_LIBRARIES`."""
    parts = [orjson.dumps(json.loads(spec), option=orjson.OPT_SORT_KEYS), Path(__file__).read_bytes(),
             repr((EXAMPLES, PROFILE, settings(), sys.version_info[:2])).encode(),
             repr([(dist, _version(dist)) for dist in KEY_LIBRARIES]).encode()]
    digest = hashlib.sha256()
    for part in parts:
        digest.update(hashlib.sha256(part).digest())
    return digest.hexdigest()


@functools.cache
def _corpus() -> dict[str, Any]:
    """:data:`CORPUS` as recorded (empty when the file is absent)."""
    if not CORPUS.is_file():
        return {}
    return msgpack.unpackb(lzma.decompress(CORPUS.read_bytes()), raw=False)  # type: ignore[no-any-return]


@functools.cache
def code_constants() -> dict[str, list[Any]]:
    """The literals of the code under test (every module of ``render_service`` and ``parsers``, not
    ``__main__``), as hypothesis reads a module's local constants (``constants_from_module``):
    ``{"integers": [str, ...], "floats": [...], "bytes": [...], "strings": [UTF-8 bytes, ...]}``
    (strings encoded with ``surrogatepass``: the code holds lone surrogates), sorted."""
    import importlib
    import pkgutil

    import parsers
    import render_service

    found = Constants()
    for package in (render_service, parsers):
        found |= constants_from_module(package)
        for info in sorted(pkgutil.walk_packages(package.__path__, package.__name__ + "."), key=lambda i: i.name):
            if not info.name.endswith(".__main__"):
                found |= constants_from_module(importlib.import_module(info.name))
    return {"integers": sorted(str(i) for i in found.integers), "floats": sorted(found.floats, key=float_to_int),
            "bytes": sorted(found.bytes),
            "strings": [text.encode("utf-8", "surrogatepass") for text in sorted(found.strings)]}


@functools.cache
def _draw_constants() -> Constants:
    """The local constants hypothesis draws from while this module's tests run: those recorded in
    :data:`CORPUS`, else (none recorded, or recording) :func:`code_constants`.

    Hypothesis takes local constants from every non-library module loaded in the process, so a fuzz
    test's draws depended on the tests that happened to run before it in its worker; with a fixed
    set they are the same in every process (:func:`_fixed_constants`)."""
    recorded = None if RECORD_TO else _corpus().get("constants")
    found = recorded if recorded is not None else code_constants()
    return Constants(integers=SortedSet(int(i) for i in found["integers"]),
                     floats=SortedSet(found["floats"], key=float_to_int),
                     bytes=SortedSet(found["bytes"]),
                     strings=SortedSet(text.decode("utf-8", "surrogatepass") for text in found["strings"]))


@functools.cache
def _this_key(base_url: str) -> str:
    return corpus_key(httpx.get(f"{base_url}/openapi.json").content)


def _recorded(base_url: str, method: str, path: str) -> list[list[Any]] | None:
    """The recorded requests of the operation when :data:`CORPUS` was recorded under this run's key
    (the plain server at ``base_url`` serves the schema), else ``None``."""
    corpus = _corpus()
    if not settings().derandomize or not corpus or corpus.get("key") != _this_key(base_url):
        return None
    return corpus["requests"].get(f"{method} {path}")  # type: ignore[no-any-return]


def _drawn(case: Any) -> tuple[Any, ...]:
    """What a generated request is: method, path, body, query, headers (an absent body as None)."""
    body = None if isinstance(case.body, NotSet) else case.body
    return case.method, case.path, body, case.query, case.headers


class _Answer:
    """A server's answer to one generated request: status, Content-Type, body bytes."""

    __slots__ = ("status_code", "content_type", "content")

    def __init__(self, status_code: int, content_type: str, content: bytes) -> None:
        self.status_code, self.content_type, self.content = status_code, content_type, content


class _Wire:
    """A keep-alive HTTP/1.1 connection (``http.client``) to one fuzzed server.

    ``case.call`` went through schemathesis' transport, requests' adapter and urllib3's pool for
    every request and server: a fifth of a fuzz test's CPU (the stop before this measured 37 of
    196 CPU-s for the file). A connection the server closed while idle is reopened and the
    request sent again, once (as requests does for a dropped keep-alive connection)."""

    def __init__(self, base_url: str) -> None:
        parts = urlsplit(base_url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.connection: http.client.HTTPConnection | None = None

    def send(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> _Answer:
        """Send one request (``path``: the request target, query included) and read the whole
        answer; the connection stays open for the next. Raises what ``http.client`` raises when
        the server does not answer on a fresh connection either."""
        for attempt in (0, 1):
            if self.connection is None:
                self.connection = http.client.HTTPConnection(self.host, self.port, timeout=DEFAULT_RESPONSE_TIMEOUT)
            try:
                self.connection.request(method, path, body=body, headers=headers)
                response = self.connection.getresponse()
                answer = _Answer(response.status, response.getheader("content-type") or "", response.read())
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                self.connection.close()
                self.connection = None
                if attempt:
                    raise
                continue
            if response.will_close:
                self.connection.close()
                self.connection = None
            return answer
        raise AssertionError("unreachable")


_WIRES: dict[str, _Wire] = {}
_LAST: list[Any] = [None, None]
"""The last generated case and its prepared request (:func:`_prepared`): each case goes to both
servers, so it is serialised and prepared once, not once per server."""


def _prepared(case: Any, base_url: str) -> requests.PreparedRequest:
    """The request ``case.call(base_url=..., session=_SESSION)`` sends for ``case``: schemathesis'
    serialisation of the case with the session's headers under the case's own (as its requests
    transport merges them), prepared by requests as that transport's ``session.request`` does."""
    kwargs = case.as_transport_kwargs(base_url=base_url, headers=dict(_SESSION.headers))
    fields = {key: kwargs[key] for key in ("method", "url", "headers", "params", "cookies", "json",
                                            "data", "files", "auth") if key in kwargs}
    return _PREPARE.prepare_request(requests.Request(**fields))


def _send(case: Any, base_url: str) -> _Answer:
    """Send ``case`` to the server at ``base_url`` as ``case.call(session=_SESSION)`` sends it
    (the same request line, headers in order and body; the ``Host`` header names the server):
    prepared once per case (:data:`_LAST`), written to that server's keep-alive :class:`_Wire`."""
    if _LAST[0] is not case:
        prepared = _prepared(case, base_url)
        body = prepared.body.encode() if isinstance(prepared.body, str) else prepared.body
        _LAST[:] = [case, (prepared.method or case.method, prepared.path_url, body, dict(prepared.headers))]
        if _RECORDING is not None:  # once per case (it goes to both servers)
            method, target, body, headers = _LAST[1]
            _RECORDING.append((case.method, case.path, method, target, body, list(headers.items())))
    return _wire(base_url).send(*_LAST[1])


def _wire(base_url: str) -> _Wire:
    """The keep-alive :class:`_Wire` to the server at ``base_url`` (opened on first use)."""
    wire = _WIRES.get(base_url)
    if wire is None:
        wire = _WIRES[base_url] = _Wire(base_url)
    return wire


def _check(case, client: httpx.Client, sent: Counter[tuple[str, str, int]]) -> None:
    response = _send(case, str(client.base_url))
    if DUMP:
        with open(DUMP, "a") as out:
            out.write(f"{_drawn(case)!r} {response.status_code}\n")
    _judge(case.method, case.path, case.body, response, sent)


def _judge(method: str, path: str, body: Any, response: _Answer, sent: Counter[tuple[str, str, int]]) -> None:
    """Count the answer to one request and check it: never a 5xx; a JSON error body has the upstream
    shape, its ``code`` the status."""
    sent[(method, path, response.status_code)] += 1
    assert response.status_code < 500, (method, path, body, response.content[:500].decode("utf-8", "replace"))
    if response.status_code >= 400 and response.content_type.startswith("application/json"):
        err = json.loads(response.content)["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["code"] == response.status_code


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


_MISSING = object()
_BRANCH_DATA = threading.local()
_CLASS_FORCES: dict[tuple[type, str], bool] = {}


def _branch_not_empty(strategy: Any) -> bool:
    """Hypothesis' own branch filter in ``one_of`` (``not s.is_currently_empty(data)``), reading the
    draw's ``data`` from :data:`_BRANCH_DATA`, so one filtered sampler serves every draw."""
    return not strategy.is_currently_empty(_BRANCH_DATA.data)


def _one_of_draw(self: Any, data: Any) -> Any:
    """``OneOfStrategy.do_draw`` with its branch sampler built once per ``one_of`` instead of per draw.

    Hypothesis 6.155 builds ``SampledFromStrategy(self.element_strategies).filter(...)`` afresh on
    every draw, and every fresh strategy is validated and has its emptiness and label computed: a
    tenth of the fuzz tests' generation CPU. The sampler drawn from is the same (same elements, same
    label: a label leaves transformations out; the same filter answer), so the same choices give
    the same value (``test_the_generation_patches_draw_identical_requests`` checks)."""
    sampler = self.__dict__.get("_render_fuzz_sampler")
    if sampler is None:
        sampler = hypothesis_strategies.SampledFromStrategy(self.element_strategies).filter(_branch_not_empty)
        self.__dict__["_render_fuzz_sampler"] = sampler
    _BRANCH_DATA.data = data
    return data.draw(data.draw(sampler))


def _class_forces(cls: type, name: str) -> bool:
    key = (cls, name)
    found = _CLASS_FORCES.get(key)
    if found is None:
        found = _CLASS_FORCES[key] = any(f"force_{name}" in vars(k) for k in cls.__mro__)
    return found


def _recursive_property(original: Any) -> Any:
    """Hypothesis' ``recursive_property`` (``is_empty``, ``has_reusable_values``, ``is_cacheable``)
    answering an already computed value from the strategy's ``__dict__`` (``force_<name>`` before
    ``cached_<name>``, as hypothesis reads them) instead of two ``getattr`` calls that raise
    ``AttributeError`` first: it runs on every draw (``ConjectureData.draw`` asks ``is_empty``). A
    value not yet computed, or a class-level ``force_<name>``, goes to hypothesis' own function."""

    def fast(strategy: Any, name: str, default: object) -> Any:
        own = getattr(strategy, "__dict__", None)
        if own is not None and not _class_forces(type(strategy), name):
            value = own.get("force_" + name, _MISSING)
            if value is _MISSING:
                value = own.get("cached_" + name, _MISSING)
            if value is not _MISSING:
                return value
        return original(strategy, name, default)

    fast.__wrapped__ = original  # type: ignore[attr-defined]
    return fast


def _mutator_groups(spans: Any) -> list[set[tuple[int, int]]]:
    """Hypothesis' ``Spans.mutator_groups``: per span label (in first-seen order), the set of
    ``(start, end)`` choice indices of its spans; only labels with two spans or more.

    Hypothesis computes it with a ``SpanProperty`` visitor that builds two ``Span`` objects per
    span to read ``start`` and ``end`` (a twelfth of a fuzz test's CPU: every example the
    generate phase mutates asks for it). This reads the same values from ``starts_and_ends`` in
    one pass over the same trail: a span starts at each trail record past ``TrailType.CHOICE``
    (its label index is ``record - CHOICE - 1``), spans numbered in the order they start, as the
    visitor numbers them; so the same groups, in the same order."""
    starts, ends = spans.starts_and_ends
    choice = int(hypothesis_data.TrailType.CHOICE)
    groups: dict[int, set[tuple[int, int]]] = {}
    index = 0
    for record in spans.trail:
        if record > choice:
            key = (starts[index], ends[index])
            group = groups.get(record - choice - 1)
            if group is None:
                groups[record - choice - 1] = {key}
            else:
                group.add(key)
            index += 1
    return [group for group in groups.values() if len(group) >= 2]


_FAST_MUTATOR_GROUPS = functools.cached_property(_mutator_groups)
_FAST_MUTATOR_GROUPS.__set_name__(hypothesis_data.Spans, "mutator_groups")
_SORTED_KEYS: dict[tuple[str, ...], tuple[str, ...]] = {}


def _constraints_key(original: Any) -> Any:
    """Hypothesis' ``choice_constraints_key`` (the key that pools every primitive draw's
    constraints dict) with the sorted key order of a non-numeric choice's constraints looked up
    once per key set instead of sorted and walked by a generator on every draw: the same tuple
    (the constraint values in sorted key order). Integer and float choices go to hypothesis'
    own function."""

    def fast(choice_type: str, constraints: Any) -> tuple[Any, ...]:
        if choice_type == "integer" or choice_type == "float":
            return original(choice_type, constraints)
        names = tuple(constraints)
        order = _SORTED_KEYS.get(names)
        if order is None:
            order = _SORTED_KEYS[names] = tuple(sorted(names))
        return tuple([constraints[name] for name in order])

    fast.__wrapped__ = original  # type: ignore[attr-defined]
    return fast


def _nested_draw(original: Any) -> Any:
    """Hypothesis' ``ConjectureData.draw`` for a draw inside another (``depth > 0``, nearly every
    draw of a request) without what only a top-level draw needs (two function-level imports, the
    draw timers, observability); the same steps otherwise, in the same order: validate, mark an
    empty strategy or too deep a draw invalid, unwrap a lazy strategy, one span under the
    strategy's label around its ``do_draw``, a note on a ``FlakyStrategyDefinition``. A top-level
    draw goes to hypothesis' own method."""

    def draw(self: Any, strategy: Any, label: int | None = None, observe_as: str | None = None) -> Any:
        if self.depth == 0:
            return original(self, strategy, label, observe_as)
        strategy.validate()
        if strategy.is_empty:
            self.mark_invalid(f"empty strategy {self!r}")
        if self.depth >= hypothesis_data.MAX_DEPTH:
            self.mark_invalid("max depth exceeded")
        unwrapped = hypothesis_lazy.unwrap_strategies(strategy)
        if label is None:
            label = unwrapped.label
        self.start_span(label=label)
        try:
            return unwrapped.do_draw(self)
        except FlakyStrategyDefinition as err:
            add_note(err, f"while drawing from {strategy!r}")
            raise
        finally:
            self.stop_span()

    draw.__wrapped__ = original  # type: ignore[attr-defined]
    return draw


@pytest.fixture(autouse=True)
def _fixed_constants() -> Iterator[None]:
    """While a test of this module runs, hypothesis' local constants are :func:`_draw_constants`
    (its cache of permitted constants emptied before and after, as hypothesis empties it when its
    own set grows). Patched apart from the ``monkeypatch`` fixture, which a test may undo."""
    constants = _draw_constants()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hypothesis_providers, "_get_local_constants", lambda: constants)
        hypothesis_providers.CONSTANTS_CACHE.cache.clear()
        yield
    hypothesis_providers.CONSTANTS_CACHE.cache.clear()


@pytest.fixture(autouse=True)
def _cheaper_generation(monkeypatch: pytest.MonkeyPatch) -> None:
    """While a test of this module runs, hypothesis draws with :func:`_one_of_draw`,
    :func:`_recursive_property`, :func:`_mutator_groups`, :func:`_constraints_key` and
    :func:`_nested_draw`: the same requests, drawn with less CPU (the stop before this measured a
    fifth of generation re-validating strategies built per draw). Other modules' tests draw with
    hypothesis as installed."""
    monkeypatch.setattr(hypothesis_strategies.OneOfStrategy, "do_draw", _one_of_draw)
    monkeypatch.setattr(hypothesis_strategies, "recursive_property",
                        _recursive_property(hypothesis_strategies.recursive_property))
    monkeypatch.setattr(hypothesis_data.Spans, "mutator_groups", _FAST_MUTATOR_GROUPS)
    monkeypatch.setattr(hypothesis_data.ConjectureData, "draw",
                        _nested_draw(hypothesis_data.ConjectureData.draw))
    fast_key = _constraints_key(hypothesis_choice.choice_constraints_key)
    monkeypatch.setattr(hypothesis_data, "choice_constraints_key", fast_key)
    monkeypatch.setattr(hypothesis_choice, "choice_constraints_key", fast_key)


@pytest.fixture
def sent(request) -> Iterator[dict[str, Counter[tuple[str, str, int]]]]:
    """Server ("plain", "parsers") -> (method, path, status) -> requests this fuzz test sent to it;
    afterwards checks, for each server, that the operation was fuzzed, a POST operation at the
    default budget (or more) with at least one POST request per example (README "Schema fuzzing":
    228 for /detokenize, 592-1,996 for the other POST routes)."""
    by_server: dict[str, Counter[tuple[str, str, int]]] = {config: Counter() for config, _ in SERVERS}
    yield by_server
    for config, counts in by_server.items():
        total = sum(counts.values())
        print(f"\n{request.node.name} ({config}): {total} requests, statuses {dict(sorted(counts.items()))}")
        assert total > 0, f"no request was generated for the {config} server"
        post = sum(n for (method, path, _), n in counts.items()
                   if method == "POST" and ("POST", path) in OPERATIONS)
        if post and EXAMPLES >= 200:  # the coverage phase's cases come on top of the examples
            assert post >= EXAMPLES, (config, post)


def _fuzz_test(method: str, path: str) -> Any:
    # Keep the body of ``test`` as it is: under ``derandomize`` hypothesis seeds the generate phase
    # from ``function_digest`` of this function's source (decorators and comments aside), so an
    # edited body draws other requests after the coverage phase. Change :func:`_check` instead.
    @schemathesis.pytest.from_fixture("api_schema").include(method=method, path=path).parametrize()
    @FUZZ
    def test(case, serve, sent):
        for config, server in SERVERS:
            _check(case, serve(**server), sent[config])

    def fuzz(request: pytest.FixtureRequest, serve: Any, sent: dict[str, Counter[tuple[str, str, int]]]) -> None:
        base_url = str(serve().base_url)
        recorded = None if RECORD_TO else _recorded(base_url, method, path)
        if recorded is not None and (method, path) != LIVE_ALWAYS:
            _replay(recorded, serve, sent)
            return
        if recorded is None and not RECORD_TO and (method, path) == LIVE_ALWAYS:
            import warnings

            warnings.warn(f"{CORPUS.name} was recorded under another key (schema, this module, example "
                          "count or libraries): every fuzz test draws live; re-record it with "
                          "tools/record_fuzz_requests.py", stacklevel=1)
        drawn = _draw_live(test, request)
        if RECORD_TO:
            folder = Path(RECORD_TO)
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{method} {path.strip('/').replace('/', '_')}.msgpack").write_bytes(msgpack.packb(
                {"key": _this_key(base_url), "operation": f"{method} {path}", "requests": drawn,
                 "constants": code_constants()}))
        elif recorded is not None:  # LIVE_ALWAYS: the corpus is what the tests draw
            assert _comparable(drawn) == _comparable(recorded), f"{CORPUS.name}: {method} {path} draws other requests"

    slug = path.strip("/").replace("/", "_")
    fuzz.__name__ = fuzz.__qualname__ = f"test_no_server_errors_{slug}_{method.lower()}_"
    fuzz.__doc__ = (f"{method} {path} on the plain and the parsers server (each generated request "
                    "sent to both): never a 5xx; 4xx bodies are {\"error\": {message,type,param,code}}. "
                    "The requests are drawn by schemathesis, or sent as recorded (:data:`CORPUS`).")
    return fuzz


CASE_ID = "X-Schemathesis-TestCaseId"
"""The one header whose value schemathesis draws outside hypothesis (random on every run): the
server ignores it, so a recorded request keeps its recorded value and comparisons leave it out."""


def _comparable(requests: list[Any]) -> list[Any]:
    """Recorded or drawn requests as lists, each header a list, :data:`CASE_ID`'s value left out."""
    return [[*r[:5], [[name, None if name == CASE_ID else value] for name, value in r[5]]] for r in requests]


def _draw_live(test: Any, request: pytest.FixtureRequest) -> list[tuple[Any, ...]]:
    """Run the schemathesis test ``test`` (it draws the requests, sends each to both servers and
    checks the answers); the requests it sent, as :data:`CORPUS` holds them."""
    global _RECORDING
    _RECORDING = []
    try:
        test(request=request)
        return _RECORDING
    finally:
        _RECORDING = None


def _replay(recorded: list[list[Any]], serve: Any, sent: dict[str, Counter[tuple[str, str, int]]]) -> None:
    """Send each recorded request to both servers, as :func:`_check` sends a drawn one, with the
    same checks (:func:`_judge`)."""
    for case_method, case_path, wire_method, target, body, headers in recorded:
        for config, server in SERVERS:
            response = _wire(str(serve(**server).base_url)).send(wire_method, target, body, dict(headers))
            if DUMP:
                with open(DUMP, "a") as out:
                    out.write(f"{(case_method, case_path, body)!r} {response.status_code}\n")
            _judge(case_method, case_path, body, response, sent[config])


for _method, _path in OPERATIONS:
    _t = _fuzz_test(_method, _path)
    globals()[_t.__name__] = _t


def test_the_fuzzed_operations_are_all_of_the_schema(serve):
    """The per-operation fuzz tests (:data:`OPERATIONS`) cover every operation of both servers'
    /openapi.json, so a new route cannot go unfuzzed; both servers serve the same document, so the
    requests drawn from the plain one's (:func:`api_schema`) are the parsers server's as well."""
    specs = [httpx.get(f"{serve(**server).base_url}/openapi.json").json() for _, server in SERVERS]
    for spec in specs:
        ops = {(method.upper(), path) for path, item in spec["paths"].items() for method in item
               if method in {"get", "put", "post", "delete", "patch", "head", "options"}}
        assert ops == set(OPERATIONS)
    assert specs[0] == specs[1]


def test_openapi_is_valid_and_describes_real_request_bodies(serve):
    """/openapi.json is a valid OpenAPI document; every POST route declares a required JSON body
    from its real request model (derender: batch or streaming body, as ``oneOf``)."""
    spec = httpx.get(f"{serve().base_url}/openapi.json").json()
    validate(spec)
    schemas = spec["components"]["schemas"]
    for path in POST_ROUTES:
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        schema = body["content"]["application/json"]["schema"]
        assert schema.get("properties") or schema.get("oneOf"), path
    assert "messages" in spec["paths"][POST_ROUTES[0]]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["properties"]
    for path, names in ((POST_ROUTES[2], {"DerenderChatRequest", "DerenderChatStreamRequest"}),
                        (POST_ROUTES[3], {"DerenderCompletionRequest", "DerenderCompletionStreamRequest"})):
        one_of = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
        assert {ref["$ref"].rsplit("/", 1)[1] for ref in one_of} == names
        assert names <= set(schemas)


@pytest.mark.parametrize("path", ["/detokenize"])
def test_the_generation_patches_draw_identical_requests(api_schema, monkeypatch, path):
    """:func:`_cheaper_generation` changes only what drawing costs: the same derandomized hypothesis
    run draws the same requests (positive and negative) with the patches as with hypothesis as
    installed (so a hypothesis upgrade that changes the patched internals fails here, not silently
    in the fuzz tests' inputs)."""
    operation = api_schema[path]["POST"]
    strategies = [operation.as_strategy(generation_mode=mode) for mode in GenerationMode]

    def draw_all() -> list[str]:
        drawn: list[str] = []
        for strategy in strategies:
            @given(strategy)
            @settings(max_examples=10, derandomize=True, database=None, deadline=None,
                      phases=[Phase.generate], suppress_health_check=list(HealthCheck))
            def collect(case):
                drawn.append(repr(_drawn(case)))

            collect()
        return drawn

    patched = draw_all()
    monkeypatch.undo()  # hypothesis as installed
    assert hypothesis_strategies.OneOfStrategy.do_draw is not _one_of_draw
    plain = draw_all()
    assert len(set(plain)) > 10, len(set(plain))
    assert patched == plain


class _Recorder(socketserver.StreamRequestHandler):
    """Records each HTTP/1.1 request's raw bytes (request line, headers, Content-Length body) in
    ``server.requests`` and answers ``200`` with an empty JSON object, keeping the connection open."""

    def handle(self) -> None:
        while True:
            head = b""
            while not head.endswith(b"\r\n\r\n"):
                line = self.rfile.readline()
                if not line:
                    return
                head += line
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            self.server.requests.append(head + self.rfile.read(length))  # type: ignore[attr-defined]
            self.wfile.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                             b"content-length: 2\r\n\r\n{}")


@pytest.mark.parametrize("path", ["/v1/completions/render", "/detokenize"])
def test_the_lean_client_sends_what_case_call_sends(api_schema, path):
    """:func:`_send` writes the bytes ``case.call(session=_SESSION)`` writes for the same generated
    request (request line, every header in order, body), for positive and negative cases (JSON,
    non-JSON and absent bodies): both are sent to a recording server on 127.0.0.1 and compared."""
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Recorder)
    server.daemon_threads = True
    server.requests = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}"
    cases: list[Any] = []
    for mode in GenerationMode:
        @given(api_schema[path]["POST"].as_strategy(generation_mode=mode))
        @settings(max_examples=25, derandomize=True, database=None, deadline=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck))
        def collect(case):
            cases.append(case)

        collect()
    try:
        by_call, by_wire = [], []
        for case in cases:
            case.call(base_url=base_url, session=_SESSION)
            by_call.append(server.requests.pop())
            assert _send(case, base_url).status_code == 200
            by_wire.append(server.requests.pop())
    finally:
        wire = _WIRES.pop(base_url, None)
        if wire is not None and wire.connection is not None:
            wire.connection.close()
        server.shutdown()
        server.server_close()
    assert len(by_call) > 25 and any(b"\r\n\r\n{" in raw for raw in by_call)
    assert any(b"\r\n\r\n{" not in raw for raw in by_call)  # a negative case's non-JSON or absent body
    assert by_wire == by_call
