"""Shared fixtures: paths to ../shared, one cache of loaded models, and real uvicorn servers on
127.0.0.1.

``serve(**settings)`` starts the app in a background thread on a free port and yields an
``httpx.Client`` bound to it; servers are cached per settings for the whole session.
``shared_bundle(settings)`` and ``hf_tokenizer(folder)`` load each model once per test process:
servers, helpers and tests that need the same model share it (loading a bundle costs seconds of
CPU and a few hundred MB).
"""

from __future__ import annotations

import ctypes
import dataclasses
import gc
import os
import resource
import socket
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from hypothesis import settings as hypothesis_settings

from render_service.models import ModelBundle, _max_model_len, load_bundle
from render_service.serving.app import create_app
from render_service.settings import Settings

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("RENDER_SERVICE_SHARED", REPO.parent / "shared"))
MODELS = SHARED / "models"


def shared_path(*parts: str) -> Path:
    """A path under ../shared; the test is skipped (and CI fails on such skips) when absent."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"needs ../shared: {path} not found")
    return path


def model_dir(name: str) -> str:
    """Folder of one of the real tokenizers in ../shared/models (e.g. ``Qwen--Qwen3-0.6B``)."""
    return str(shared_path("models", name))


#: Hypothesis profile: ``ci`` (the default, and what CI runs) keeps every property's full example
#: count and draws them from a fixed seed (``derandomize``), so a run's verdict depends on the
#: code only; ``HYPOTHESIS_PROFILE=explore`` draws fresh random examples (five times as many) to
#: hunt for new failures, whose right values then become pinned tests; ``HYPOTHESIS_PROFILE=dev``
#: runs a fifth of them for a quicker local loop.
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
_SCALE = {"ci": 1.0, "dev": 0.2, "explore": 5.0}
if PROFILE not in _SCALE:
    raise pytest.UsageError(f"HYPOTHESIS_PROFILE={PROFILE!r}: choose one of {', '.join(_SCALE)}")
hypothesis_settings.register_profile("ci", deadline=None, derandomize=True, database=None)
hypothesis_settings.register_profile("dev", deadline=None, max_examples=20)
hypothesis_settings.register_profile("explore", deadline=None, max_examples=500)
hypothesis_settings.load_profile(PROFILE)


def examples(n: int) -> int:
    """The example count for a property written for ``n`` examples under the active profile
    (``n`` under ``ci``; a fifth, at least 5, under ``dev``; five times ``n`` under ``explore``)."""
    return n if PROFILE == "ci" else max(5, int(n * _SCALE[PROFILE]))


#: Settings fields that :func:`render_service.models.load_bundle` does not read. Bundles loaded under
#: settings that differ only in these are the same, so they are shared; any other field (including
#: one added later) keeps bundles apart, which is never wrong, only slower.
NOT_BUNDLE_FIELDS = frozenset({
    "host", "port", "reasoning_parser", "tool_call_parser", "enable_auto_tool_choice",
    "default_chat_template_kwargs", "max_logprobs", "keep_stop_strings", "renderer_num_workers",
    "trust_request_chat_template", "exclude_tools_when_tool_choice_none",
    "chat_template_content_format", "template_max_seconds", "template_max_chars",
    "renderer_threads", "max_queued_requests", "queue_timeout", "max_request_body_bytes",
    "max_messages", "max_tools", "max_n", "max_stream_state_bytes", "api_keys",
    "stream_state_keys", "allow_unsigned_stream_state", "shutdown_delay", "log_format",
    "timeout_keep_alive",
    # read per request or kept per settings in the bundle's memo (multimodal state), not by load_bundle
    "anthropic_disabled_thinking_effort", "stream_interval", "reasoning_effort_map", "system_start_date",
    "cohere_format", "limit_mm_per_prompt", "mm_processor_kwargs", "trust_request_mm_kwargs",
    "allowed_local_media_path", "allowed_media_domains", "media_io_kwargs", "mm_hasher_algorithm",
    "max_image_pixels", "media_max_bytes", "media_fetch_timeout", "media_max_redirects",
    "allow_private_media_urls", "mm_cache_bytes",
    # gateway mode: the engine client, not the model
    "engine_urls", "prefill_urls", "engine_timeout", "engine_connect_timeout", "engine_max_connections",
    "engine_api_key",
})
_BUNDLES: dict[str, ModelBundle] = {}
_LOADED_AS: dict[str, str] = {}
_TOKENIZERS: dict[str, Any] = {}
_RESIDENT: dict[str, None] = {}
MAX_MODELS = int(os.environ.get("RENDER_SERVICE_TEST_MAX_MODELS", "8"))
"""Model folders whose tokenizer and bundles are kept per test process: beyond this the least
recently used folder is dropped with its HF tokenizer and every bundle loaded from it, and freed
(the product keeps nothing built from a bundle once the bundle is dropped:
tests/test_bundle_release.py; live servers keep their own bundle until they stop). A folder
costs 100-350 MB and ~2-4 CPU-s to load; tests parametrized by folder run on one worker per
folder, one after another (:func:`pytest_collection_modifyitems`), so a folder is rarely loaded
twice. ``RENDER_SERVICE_TEST_MAX_MODELS`` overrides the bound (to measure others)."""
RSS_BUDGET_MB = int(os.environ.get("RENDER_SERVICE_TEST_RSS_BUDGET_MB", "2600"))
"""While this test process's resident memory is above this (MB), each use of the model cache
drops one more least recently used folder (down to :data:`MIN_MODELS`): the kept models are the
part of a worker's memory that can be given back, and the worker's peak (3 GB goal) is this plus
a test's transient (a 12-megapixel image: ~260 MB). ``RENDER_SERVICE_TEST_RSS_BUDGET_MB``
overrides it."""
MIN_MODELS = 5
"""Folders kept however high the resident memory is (fewer would reload models within one test
file that cycles through them)."""
LOADS: dict[str, int] = {"tokenizers": 0, "bundles": 0}
"""How many tokenizers and bundles this test process loaded (reloads of dropped folders included)."""


#: Settings fields that only set a bundle's ``names`` and ``max_model_len``: bundles whose settings
#: differ only in these are one loaded bundle (tokenizer, template, prompt encoder) with those two
#: fields set as ``load_bundle`` sets them (``Settings.model_names``, ``models._max_model_len``).
NAME_AND_LENGTH_FIELDS = frozenset({"served_model_name", "max_model_len"})


def _folder_key(path: str) -> str:
    """The key a model folder is cached under: its real path, so that one folder named two ways
    (``../shared/models/X`` and its absolute path, or through the ``/tmp/shared`` symlink) is one
    tokenizer and one set of bundles; a hub id (not a folder) stays as given."""
    return os.path.realpath(path) if os.path.isdir(path) else path


def _in_live_servers() -> set[str]:
    """The model folders (:func:`_folder_key`) of the live servers: they hold their bundle (and
    its tokenizer) until they stop, so dropping such a folder from the cache frees nothing and
    only makes the next test that needs it load a second copy."""
    return {_folder_key(s.settings.model_path) for s in _SERVERS.values()}


def _touch(path: str) -> None:
    """Mark the model folder ``path`` (a :func:`_folder_key`) as just used; drop the least
    recently used folders beyond :data:`MAX_MODELS`, and one more while the process is above
    :data:`RSS_BUDGET_MB` (their tokenizer and bundles), skipping those
    a live server holds (:func:`_in_live_servers`; they are dropped later, once their server
    stopped)."""
    _RESIDENT.pop(path, None)
    _RESIDENT[path] = None
    limit = MAX_MODELS
    if len(_RESIDENT) > MIN_MODELS and _vm_mb()[0] > RSS_BUDGET_MB:
        limit = min(limit, len(_RESIDENT) - 1)
    _drop_beyond(limit, path)


def _make_room(path: str) -> None:
    """Before a tokenizer or bundle of ``path`` (a :func:`_folder_key`) is loaded: if the folder
    is not resident, drop the least recently used folders beyond :data:`MAX_MODELS` counting
    ``path``, the ones its :func:`_touch` after the
    load would drop, so that the load's own memory does not come on top of theirs (a tokenizer
    load with 8 folders resident set a worker's 2.87 GB peak). The memory budget is still checked
    only after the load, as before (no more folders dropped than before)."""
    if path not in _RESIDENT:
        _drop_beyond(MAX_MODELS - 1, path)


def _drop_beyond(limit: int, path: str) -> None:
    """Drop the least recently used folders (their tokenizer, bundles and memos) until at most
    ``limit`` are resident, never ``path`` nor one a live server holds."""
    if len(_RESIDENT) <= limit:
        return
    held = _in_live_servers() | {path}
    victims = [p for p in _RESIDENT if p not in held][: len(_RESIDENT) - limit]
    if not victims:
        return
    for old in victims:
        del _RESIDENT[old]
        _TOKENIZERS.pop(old, None)
        _EXTRAS.pop(old, None)
        for key in [k for k in _BUNDLES if _BUNDLE_PATH[k] == old]:
            del _BUNDLES[key], _LOADED_AS[key], _BUNDLE_PATH[key]
    gc.collect()
    _malloc_trim()


_BUNDLE_PATH: dict[str, str] = {}
_EXTRAS: dict[str, dict[str, Any]] = {}


def folder_memo(folder: str, key: str, build: Callable[[], Any]) -> Any:
    """``build()``, built once per test process for the ../shared/models folder ``folder`` and
    ``key`` (e.g. that tokenizer's FastEncoder), kept while the folder's tokenizer and bundles are
    (dropped with them beyond :data:`MAX_MODELS`, so no helper holds a dropped model)."""
    path = _folder_key(str(shared_path("models", folder)))
    extras = _EXTRAS.setdefault(path, {})
    if key not in extras:
        extras[key] = build()
    _touch(path)
    return extras[key]


def _malloc_trim() -> None:
    """Give freed heap pages back to the OS (glibc), so a dropped model lowers the RSS."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def bundle_key(settings: Settings, also_ignored: frozenset[str] = frozenset()) -> str:
    """What identifies the bundle ``settings`` load (``also_ignored``: more fields left out)."""
    fields = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings)}
    ignored = NOT_BUNDLE_FIELDS | also_ignored
    return repr(sorted((k, v) for k, v in fields.items() if k not in ignored))


def shared_bundle(settings: Settings) -> ModelBundle:
    """``load_bundle(settings)``, loaded once per test process for all settings that share the
    bundle fields (see :data:`NOT_BUNDLE_FIELDS`, :data:`NAME_AND_LENGTH_FIELDS`), kept while its
    model folder is among the :data:`MAX_MODELS` most recently used. Raises what ``load_bundle``
    raises."""
    key = bundle_key(settings)
    path = _folder_key(str(settings.model_path))
    bundle = _BUNDLES.get(key)
    if bundle is None:
        # the bundle as loaded: names, length and how the folder is spelled aside (``root`` is
        # the spelling, as load_bundle sets it; the folder's files are the same)
        loaded = f"{path}|{bundle_key(settings, NAME_AND_LENGTH_FIELDS | {'model'})}"
        twin = next((b for k, b in _BUNDLES.items() if _LOADED_AS[k] == loaded), None)
        if twin is not None:
            bundle = dataclasses.replace(twin, names=settings.model_names, root=settings.model_path,
                                         max_model_len=_max_model_len(settings, twin.config, twin.tokenizer))
        else:
            _make_room(path)
            own = Path(path).is_dir() and getattr(settings, "tokenizer", None) is None  # no --tokenizer
            bundle = load_bundle(settings, _tokenizer_at(path) if own else None)
            LOADS["bundles"] += 1
        _BUNDLES[key], _LOADED_AS[key], _BUNDLE_PATH[key] = bundle, loaded, path
    _touch(path)
    return bundle


def _tokenizer_at(path: str):  # type: ignore[no-untyped-def]
    path = _folder_key(path)
    tok = _TOKENIZERS.get(path)
    if tok is None:
        from transformers import AutoTokenizer

        _make_room(path)
        tok = _TOKENIZERS[path] = AutoTokenizer.from_pretrained(path)
        LOADS["tokenizers"] += 1
    _touch(path)
    return tok


def hf_tokenizer(folder: str):  # type: ignore[no-untyped-def]
    """The plain Hugging Face tokenizer of ``../shared/models/<folder>`` (or of the folder at the
    absolute path ``folder``, e.g. the embedded model's), the reference the tests compare with,
    loaded once per test process while that folder is kept (:data:`MAX_MODELS`) and shared with
    the bundles of that folder."""
    return _tokenizer_at(folder if os.path.isabs(folder) else str(shared_path("models", folder)))


def _case_tokenizer(folder: Path):  # type: ignore[no-untyped-def]
    """:func:`parsers.cases.tokenizer` in a test process: the same ``AutoTokenizer`` of that folder,
    from this process's model cache (:func:`hf_tokenizer`) rather than a second, never freed
    ``functools.cache`` of its own (the parser tests loaded up to five tokenizers a second time,
    1.5-4 CPU-s and 80-220 MB each, held to the end of the run)."""
    return _tokenizer_at(str(folder))


def _share_case_tokenizers() -> None:
    import parsers.cases

    parsers.cases.tokenizer = _case_tokenizer  # type: ignore[assignment]
    conformance = sys.modules.get("parsers.conformance")  # bound its own name if imported already
    if conformance is not None:
        conformance.tokenizer = _case_tokenizer  # type: ignore[attr-defined]


_share_case_tokenizers()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_CLIENT_TLS = ssl.create_default_context()
"""One TLS context for every test server's client: httpx builds a context (the CA bundle loaded,
~36 CPU-ms) for each ``Client`` unless given one, though these clients speak plain HTTP to
127.0.0.1 (~100 servers a run: ~3.5 CPU-s)."""


class _Server:
    """A real uvicorn server of ``create_app(settings, bundle)`` in a thread (``bundle``: the
    session's :func:`shared_bundle` unless given)."""

    def __init__(self, settings: Settings, bundle: ModelBundle | None = None) -> None:
        port = _free_port()
        self.settings = settings
        self.base_url = f"http://127.0.0.1:{port}"
        if bundle is None:
            try:
                bundle = shared_bundle(settings)
            except Exception:  # noqa: BLE001 - the app loads it itself and fails as the test expects
                bundle = None
        app = create_app(settings, bundle)
        config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("server did not start")
            time.sleep(0.05)
        self.client = httpx.Client(base_url=self.base_url, timeout=60, verify=_CLIENT_TLS)

    def stop(self) -> None:
        self.client.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        forget_stopped_apps()


def forget_stopped_apps() -> None:
    """Let a stopped server's app (and the bundle, caches and state it holds) be freed: FastAPI
    keeps every route's endpoint in module-level ``lru_cache``s of 4,096 entries
    (``fastapi.dependencies.models._is_*_callable_cached``), and our endpoints close over their
    app, so without this each app a test process builds would stay alive. The caches only
    classify callables (sync/async/generator) and refill on the next request."""
    from fastapi.dependencies import models as fastapi_models

    for name in ("_is_gen_callable_cached", "_is_async_gen_callable_cached", "_is_coroutine_callable_cached"):
        cached = getattr(fastapi_models, name, None)
        if cached is not None and hasattr(cached, "cache_clear"):
            cached.cache_clear()


_SERVERS: dict[str, _Server] = {}
MAX_LIVE_SERVERS = 3
"""Servers are cached per settings, least recently used stopped beyond this: each holds a loaded
model (tokenizer, fast encoder, caches), and keeping every configuration of the session alive
grew one pytest process past 11 GB."""


@pytest.fixture(scope="session")
def serve() -> Iterator:
    """Factory: ``serve(model=..., reasoning_parser=...)`` -> httpx.Client on a live server."""

    def start(**kwargs) -> httpx.Client:
        kwargs.setdefault("host", "127.0.0.1")
        for key in ("served_model_name",):
            if key in kwargs and isinstance(kwargs[key], list):
                kwargs[key] = tuple(kwargs[key])
        settings = Settings(**kwargs)
        key = repr(settings)
        server = _SERVERS.pop(key, None) or _Server(settings)
        _SERVERS[key] = server  # most recently used last
        while len(_SERVERS) > MAX_LIVE_SERVERS:
            _SERVERS.pop(next(iter(_SERVERS))).stop()
            gc.collect()
        return server.client

    yield start
    for server in _SERVERS.values():
        server.stop()
    _SERVERS.clear()


def _folders_named(values: Iterable[Any], folders: set[str], depth: int = 3) -> set[str]:
    """The model folders that parameter values name: a folder name, or a path (``str`` or ``Path``)
    ending in one, also inside tuples, lists, dict values and dataclass fields (``depth`` levels)."""
    found: set[str] = set()
    for value in values:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        if isinstance(value, str):
            name = value.rstrip("/").rsplit("/", 1)[-1]
            if name in folders:
                found.add(name)
        elif depth and isinstance(value, (tuple, list)):
            found |= _folders_named(value, folders, depth - 1)
        elif depth and isinstance(value, dict):
            found |= _folders_named(value.values(), folders, depth - 1)
        elif depth and dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = (getattr(value, f.name) for f in dataclasses.fields(value))
            found |= _folders_named(fields, folders, depth - 1)
    return found


def _folders_in_code(code: Any, namespace: dict[str, Any], folders: set[str], depth: int = 2,
                     seen: set[Any] | None = None) -> set[str]:
    """The model folders that the code object ``code`` names: its string constants (a folder name or
    a path ending in one), the module-level names it reads whose value names one (a ``str`` or
    ``Path``, also inside tuples, lists and dicts: :func:`_folders_named`), and the same in the
    module's own functions that it calls, ``depth`` levels down (nested functions, lambdas and
    comprehensions included)."""
    seen = set() if seen is None else seen
    if code in seen:
        return set()
    seen.add(code)
    found: set[str] = set()
    for const in code.co_consts:
        if isinstance(const, str):
            found |= _folders_named([const], folders, 0)
        elif hasattr(const, "co_consts"):
            found |= _folders_in_code(const, namespace, folders, depth, seen)
    for name in code.co_names:
        value = namespace.get(name)
        if isinstance(value, (str, os.PathLike, tuple, list, dict)):
            found |= _folders_named([value], folders)
        elif depth and callable(value) and getattr(value, "__module__", None) == namespace.get("__name__"):
            inner = getattr(getattr(value, "__wrapped__", value), "__code__", None)
            if inner is not None:
                found |= _folders_in_code(inner, namespace, folders, depth - 1, seen)
    return found


def _folder_used_by(item: pytest.Item, folders: set[str]) -> str | None:
    """The one model folder a test's code (and its own module's fixtures and helpers) names, when
    it names exactly one: such a test loads that folder without a parameter saying so (e.g.
    ``hf_tokenizer("openai--gpt-oss-20b")`` or a module constant), so it is grouped with the
    folder's parametrized tests instead of loading the folder a second time on another worker."""
    function = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if function is None or module is None:
        return None
    # the parametrized items of one test function share the answer: computed once per function
    fixture_info = getattr(item, "_fixtureinfo", None)
    key = (module.__name__, getattr(function, "__wrapped__", function).__code__,
           tuple(getattr(fixture_info, "names_closure", ())), frozenset(folders))
    if key not in _FOLDER_USED:
        _FOLDER_USED[key] = _folder_named_by(function, module, fixture_info, folders)
    return _FOLDER_USED[key]


_FOLDER_USED: dict[tuple[Any, ...], str | None] = {}
""":func:`_folder_used_by`'s answers, per test function (and its fixtures and the folders)."""


def _folder_named_by(function: Any, module: Any, fixture_info: Any, folders: set[str]) -> str | None:
    namespace = vars(module)
    codes = [getattr(function, "__wrapped__", function).__code__]
    for name in getattr(fixture_info, "names_closure", ()):
        fixture = namespace.get(name)
        wrapped = getattr(fixture, "__wrapped__", None) or getattr(fixture, "_get_wrapped_function", lambda: None)()
        if wrapped is not None and getattr(wrapped, "__module__", None) == module.__name__:
            codes.append(wrapped.__code__)
    found: set[str] = set()
    for code in codes:
        found |= _folders_in_code(code, namespace, folders)
    return found.pop() if len(found) == 1 else None


def drop_pillow_blocks() -> None:
    """Hand Pillow's cached free image blocks back to the OS (``Image.core.clear_cache``).
    ``image.configure_pillow`` (a vision server's process-wide setting) keeps up to
    ``PILLOW_BLOCKS`` freed 64 MB blocks for the next image; in the test process they would stay
    resident for the rest of the run after the first large image (up to 256 MB of a worker's
    peak). Only the cache is emptied: the block size and the bound stay as the server set them,
    and the next image allocates its blocks anew (what a server does after its first images).
    Called after each test, and by tests that build large images, once they hold them as arrays."""
    pil = sys.modules.get("PIL.Image")
    if pil is not None:
        pil.core.clear_cache()


_FOLDER_GROUP = pytest.StashKey[str]()
"""The model folder an item was grouped by (:func:`pytest_collection_modifyitems`)."""


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """After the last test of a folder's group on this process, drop that folder's
    :func:`folder_memo` entries (test-only builds such as the tiktoken FastEncoder, 40-60 MB of
    tables per folder that no bundle or server uses: the product's prompt encoder is fastokens
    for every shared folder). The folder's tokenizer and bundles stay (:data:`MAX_MODELS`); a later
    test that asks for an entry again rebuilds it (only ``Qwen--Qwen3-0.6B``'s encoder is asked
    for outside its group). This keeps the worker holding the most folders under 3 GB."""
    drop_pillow_blocks()
    folder = item.stash.get(_FOLDER_GROUP, None)
    if folder is None or (nextitem is not None and nextitem.stash.get(_FOLDER_GROUP, None) == folder):
        return
    if _EXTRAS.pop(_folder_key(str(MODELS / folder)), None):
        gc.collect()
        _malloc_trim()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests parametrized with a ../shared/models folder name are grouped by that folder
    (``xdist_group``): under ``--dist loadgroup`` (pyproject addopts) one worker runs all of a
    folder's parametrized tests, so each worker loads fewer models (CPU and peak memory). A group's
    tests (a folder's, or an explicit ``xdist_group``) are also moved together (to where its first
    one was collected), so that with or without xdist they run one after another while the folder's
    model is cached."""
    folders = {p.name for p in MODELS.iterdir() if p.is_dir()} if MODELS.is_dir() else set()
    first: dict[str, int] = {}
    order: list[tuple[int, int]] = []
    for i, item in enumerate(items):
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.get_closest_marker("xdist_group") is None:
            named = sorted(_folders_named(params.values(), folders)) or [_folder_used_by(item, folders)]
            if named[0]:
                item.add_marker(pytest.mark.xdist_group(named[0]))
                item.stash[_FOLDER_GROUP] = named[0]
        marker = item.get_closest_marker("xdist_group")
        group = str(marker.args[0] if marker.args else marker.kwargs.get("name")) if marker else None
        order.append((first.setdefault(group, i) if group else i, i))
    # a folder's tests run one after another (also with -n 0), as xdist runs a group on one worker:
    # the model cache keeps only the recently used folders (MAX_MODELS)
    items[:] = [items[i] for _, i in sorted(order)]


_MEMLOG = os.environ.get("RENDER_SERVICE_MEMLOG")
"""A folder: when set, each test process appends one line per test to ``<folder>/<worker>.tsv``
(test id, wall seconds, CPU seconds, VmRSS and VmHWM in MB after the test, model folders loaded,
and last the CPU seconds of child processes reaped during the test: servers stopped in teardown),
to find what raises the suite's peak memory. Unset (the default): nothing is measured."""


def _vm_mb() -> tuple[int, int]:
    rss = hwm = 0
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) // 1024
            elif line.startswith("VmHWM:"):
                hwm = int(line.split()[1]) // 1024
    return rss, hwm


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


if _MEMLOG:

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        start, cpu = time.monotonic(), time.process_time()
        children = _children_cpu()
        before = _vm_mb()
        yield
        rss, hwm = _vm_mb()
        Path(_MEMLOG).mkdir(parents=True, exist_ok=True)
        with open(Path(_MEMLOG) / f"{worker}.tsv", "a") as out:
            out.write(f"{item.nodeid}\t{time.monotonic() - start:.2f}\t{time.process_time() - cpu:.2f}\t"
                      f"{before[0]}\t{rss}\t{hwm}\t{len(_RESIDENT)}\t{len(_SERVERS)}\t"
                      f"{LOADS['tokenizers']}\t{LOADS['bundles']}\t"
                      f"{','.join(Path(p).name for p in _RESIDENT)}\t{_children_cpu() - children:.2f}\n")
