"""Chat templates: compile once in a Hugging Face–compatible Jinja sandbox, render under a budget.

The environment matches ``transformers.utils.chat_template_utils`` (5.x): jinja2
``ImmutableSandboxedEnvironment`` with ``trim_blocks``, ``lstrip_blocks``, the ``loopcontrols``
extension and a no-op ``{% generation %}`` block; globals ``raise_exception``, ``strftime_now``,
``dict``, ``namespace``; a ``tojson`` filter with HF semantics (``ensure_ascii=False``,
``indent``, ``separators``, ``sort_keys``). Template variables are the tokenizer's
``special_tokens_map`` (``bos_token`` ...) under the request kwargs, plus ``messages``, ``tools``,
``documents`` and ``add_generation_prompt``.

Budgets: the output is produced with ``Template.generate`` and stopped once it exceeds
``max_chars``; ``*``/``**`` on strings and sequences are size-checked before they run; a watchdog
thread raises :class:`_RenderTimeout` asynchronously in the rendering thread when the wall-clock
budget is spent (this also stops pure ``for`` loops that call nothing). All failures become
:class:`TemplateRenderError` (HTTP 400).
"""

from __future__ import annotations

import ctypes
import dataclasses
import heapq
import itertools
import json
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import orjson
from jinja2.sandbox import ImmutableSandboxedEnvironment

from .errors import TemplateRenderError
from .fast_template import FastRenderFailed, FastTemplate, compile_fast, prove

CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
"""Marker appended to the final message for ``continue_final_message`` (as transformers)."""


class TemplateRaised(jinja2.TemplateError):
    """The template called ``raise_exception(message)``: a deliberate refusal, never retried."""


class TemplateDataError(TemplateRenderError):
    """The template failed on the data it was given (type error, undefined value ...), as opposed
    to refusing it with ``raise_exception``; callers may retry with another message shape."""


class _RenderTimeout(BaseException):
    """Raised asynchronously in a rendering thread whose time budget is spent."""


class _OutputTooLarge(Exception):
    """The rendered text (or an intermediate ``*`` product) exceeds the size budget."""


def _raise_exception(message: str) -> None:
    raise TemplateRaised(message)


def _tojson(
    x: Any, ensure_ascii: bool = False, indent: Any = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """HF's ``tojson`` filter (``json.dumps``), remembered for values seen before (see
    :data:`_TOJSON_SEEN`)."""
    try:
        key = orjson.dumps(x)
    except (TypeError, orjson.JSONEncodeError):  # a value orjson refuses: never remembered
        key = None
    def dumps() -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    if key is None or b"null" in key or len(key) > _TOJSON_MAX_KEY:
        return dumps()
    full = (key, repr(ensure_ascii), repr(indent), repr(separators), repr(sort_keys))
    text = _TOJSON_SEEN.get(full)
    if text is None:
        text = dumps()
        if len(_TOJSON_SEEN) >= _TOJSON_ENTRIES:
            _TOJSON_SEEN.clear()
        _TOJSON_SEEN[full] = text
    return text


_TOJSON_SEEN: dict[tuple[bytes, str, str, str, str], str] = {}
"""``tojson`` results by the value's orjson bytes and the filter's arguments. The templates print
the request's tools and history tool-call arguments with it on every render, each ~5 µs of
``json.dumps``; a conversation sends the same ones again on each turn. The orjson bytes identify
the value for ``json.dumps``: the same bytes come only from values that ``json.dumps`` writes the
same (same key order, types and floats; orjson refuses non-string keys, integers beyond 64 bits
and other types, which are then never remembered), except that orjson writes NaN and infinities
as ``null``, so a value whose bytes hold ``null`` is never remembered either. Bounded: at most
:data:`_TOJSON_ENTRIES` values of at most :data:`_TOJSON_MAX_KEY` bytes (~8 MB at worst; 4,096
entries of up to 64 KB let a 5-second load test of real requests grow a server by ~70–150 MB,
``tests/test_ops_load.py``), cleared whole when full."""
_TOJSON_ENTRIES = 256
_TOJSON_MAX_KEY = 16_384


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


class _TemplateDict:
    """``dict(...)`` inside templates without exposing the ``dict`` type itself."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
        return dict.fromkeys(*args, **kwargs)


class _TemplateNamespace(jinja2.utils.Namespace):
    """``namespace(...)`` that refuses underscore-prefixed attribute names (as transformers)."""

    def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 - Jinja's signature trick
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _TemplateNamespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(f"namespace attribute {name!r} may not start with '_'")


class _GenerationBlock(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (HF assistant masks): renders its body unchanged."""

    tags = {"generation"}

    def parse(self, parser: jinja2.parser.Parser) -> jinja2.nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(lineno)

    def _body(self, caller: Any) -> str:
        return caller()


class _BudgetedEnvironment(ImmutableSandboxedEnvironment):
    """The HF sandbox plus a size check on ``*`` and ``**`` (``'x' * 10**9`` fails fast)."""

    intercepted_binops = frozenset({"*", "**"})
    max_product = 1 << 24

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if (
                    isinstance(seq, (str, list, tuple))
                    and isinstance(n, int)
                    and len(seq) * n > self.max_product
                ):
                    raise _OutputTooLarge(f"'*' result of {len(seq) * n} items")
        if operator == "**" and isinstance(right, int) and abs(right) > 4096:
            raise _OutputTooLarge(f"'**' exponent {right}")
        return super().call_binop(context, operator, left, right)

    def getattr(self, obj: Any, attribute: str) -> Any:
        """``obj.attribute`` with the sandbox's answer, faster on the common shapes.

        A ``dict`` instance has exactly the attributes ``dir(dict)`` lists, so any other name goes
        straight to the item lookup jinja would fall back to. Whether an attribute is safe depends
        only on the object's type and the name (``is_internal_attribute``,
        ``modifies_known_mutable``), so the verdict is cached per ``(type, name)``.
        """
        kind = type(obj)
        if kind is dict and attribute not in _DICT_ATTRS:
            try:
                return obj[attribute]
            except (TypeError, LookupError):
                return self.undefined(obj=obj, name=attribute)
        try:
            value = getattr(obj, attribute)
        except AttributeError:
            return super().getattr(obj, attribute)
        fmt = self.wrap_str_format(value)
        if fmt is not None:
            return fmt
        key = (kind, attribute)
        safe = _SAFE_ATTRIBUTES.get(key)
        if safe is None:
            safe = self.is_safe_attribute(obj, attribute, value)
            if len(_SAFE_ATTRIBUTES) >= _SAFE_ATTRIBUTES_MAX:
                _SAFE_ATTRIBUTES.clear()
            _SAFE_ATTRIBUTES[key] = safe
        return value if safe else self.unsafe_undefined(obj, attribute)


_DICT_ATTRS = frozenset(dir(dict))
_SAFE_ATTRIBUTES: dict[tuple[type, str], bool] = {}
_SAFE_ATTRIBUTES_MAX = 4096


def make_environment() -> ImmutableSandboxedEnvironment:
    """A fresh HF-compatible sandboxed environment (see module docstring)."""
    env = _BudgetedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[_GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = _tojson
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _TemplateNamespace
    return env


# ---------------------------------------------------------------------------------------------
# Watchdog: one daemon thread that interrupts renders past their deadline.


@dataclass(slots=True)
class _Job:
    thread_id: int
    deadline: float
    done: bool = False
    fired: bool = False


class _Watchdog:
    """Raise :class:`_RenderTimeout` in threads whose render outlives its deadline."""

    def __init__(self) -> None:
        self._lock = threading.Condition()
        self._heap: list[tuple[float, int, _Job]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def add(self, seconds: float) -> _Job:
        job = _Job(threading.get_ident(), time.monotonic() + seconds)
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="template-watchdog", daemon=True)
                self._thread.start()
            heapq.heappush(self._heap, (job.deadline, next(self._seq), job))
            self._lock.notify()
        return job

    def remove(self, job: _Job) -> None:
        with self._lock:
            job.done = True
        if job.fired:  # the exception may still be pending in this thread: clear it
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(job.thread_id), None)

    def _run(self) -> None:
        with self._lock:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._lock.wait()
                    continue
                deadline, _, job = self._heap[0]
                delay = deadline - time.monotonic()
                if delay > 0:
                    self._lock.wait(delay)
                    continue
                heapq.heappop(self._heap)
                job.fired = True
                ctypes.pythonapi.PyThreadState_SetAsyncExc(
                    ctypes.c_ulong(job.thread_id), ctypes.py_object(_RenderTimeout)
                )


_WATCHDOG = _Watchdog()


# ---------------------------------------------------------------------------------------------


def _mentions_content(node: jinja2.nodes.Node, names: set[str]) -> bool:
    for sub in itertools.chain(
        (node,), node.find_all((jinja2.nodes.Getattr, jinja2.nodes.Getitem, jinja2.nodes.Name))
    ):
        if isinstance(sub, jinja2.nodes.Getattr) and sub.attr == "content":
            return True
        if (
            isinstance(sub, jinja2.nodes.Getitem)
            and isinstance(sub.arg, jinja2.nodes.Const)
            and sub.arg.value == "content"
        ):
            return True
        if isinstance(sub, jinja2.nodes.Name) and sub.name in names:
            return True
    return False


def detect_content_format(env: jinja2.Environment, source: str) -> str:
    """``"openai"`` when the template loops over a message's ``content`` (directly or through a
    variable set from it), else ``"string"`` — vLLM's ``--chat-template-content-format auto``."""
    try:
        ast = env.parse(source)
    except jinja2.TemplateSyntaxError:
        return "string"
    names: set[str] = set()
    for assign in ast.find_all(jinja2.nodes.Assign):
        if isinstance(assign.target, jinja2.nodes.Name) and _mentions_content(assign.node, set()):
            names.add(assign.target.name)
    for loop in ast.find_all(jinja2.nodes.For):
        if _mentions_content(loop.iter, names):
            return "openai"
    return "string"


@dataclass(frozen=True, slots=True)
class CompiledTemplate:
    """A chat template compiled once per bundle.

    Attributes:
        source: the Jinja text.
        template: the compiled ``jinja2.Template``.
        content_format: ``"string"`` or ``"openai"`` (see :func:`detect_content_format`).
        special_tokens: ``bos_token``, ``eos_token`` ... (the tokenizer's ``special_tokens_map``).
        supports_developer: the template names the ``"developer"`` role (else developer messages
            are rendered as system messages, as vLLM).
        fast: the template's minijinja twin when :func:`with_fast` proved it identical on the
            start-up probes (:mod:`.fast_template`), else ``None`` (the sandbox renders alone).
    """

    source: str
    template: jinja2.Template
    content_format: str
    special_tokens: dict[str, Any]
    supports_developer: bool = False
    fast: FastTemplate | None = None


def compile_template(source: str, special_tokens: dict[str, Any] | None = None) -> CompiledTemplate:
    """Compile ``source``.

    Raises:
        TemplateRenderError: syntax error in the template.
    """
    env = make_environment()
    try:
        template = env.from_string(source)
    except jinja2.TemplateError as exc:
        raise TemplateRenderError(f"chat template does not compile: {exc}", param="chat_template") from None
    return CompiledTemplate(
        source,
        template,
        detect_content_format(env, source),
        dict(special_tokens or {}),
        '"developer"' in source or "'developer'" in source,
    )


def with_fast(ct: CompiledTemplate) -> CompiledTemplate:
    """``ct`` with its minijinja twin when :func:`.fast_template.prove` shows it renders every
    start-up probe as the sandbox does (else ``ct`` unchanged; the reason is logged)."""
    fast = prove(fast_twin(ct.source), lambda variables: _run_budgeted(ct, variables, 2.0, 8_000_000),
                 ct.special_tokens)
    return dataclasses.replace(ct, fast=fast) if fast is not None else ct


def fast_twin(source: str) -> FastTemplate | None:
    """``source`` compiled by minijinja with this module's HF helpers (``tojson``,
    ``raise_exception``, ``strftime_now``), unproven; ``None`` when minijinja cannot take it."""
    return compile_fast(source, {"tojson": _tojson},
                        {"raise_exception": _raise_exception, "strftime_now": _strftime_now})


def _generate(ct: CompiledTemplate, variables: dict[str, Any], max_chars: int) -> str:
    parts: list[str] = []
    size = 0
    for piece in ct.template.generate(**variables):
        size += len(piece)
        if size > max_chars:
            raise _OutputTooLarge(f"rendered prompt longer than {max_chars} characters")
        parts.append(piece)
    return "".join(parts)


def render(
    ct: CompiledTemplate,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    documents: list[dict[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    continue_final_message: bool = False,
    kwargs: dict[str, Any] | None = None,
    max_seconds: float = 2.0,
    max_chars: int = 8_000_000,
) -> str:
    """Render ``messages`` to the prompt text, like transformers' ``apply_chat_template(tokenize=False)``.

    ``kwargs`` (chat template kwargs) override the special-token variables. With
    ``continue_final_message`` the final message is left open (HF's tag method, including the
    rstrip when the template trims the message).

    Raises:
        TemplateRenderError: the template raised (``raise_exception``, type errors, undefined
            values), exceeded ``max_seconds`` of wall-clock time or ``max_chars`` of output, or
            ``continue_final_message`` cannot be applied.
        TemplateDataError: (a TemplateRenderError) the template failed on the data's shape.
    """
    variables = {**ct.special_tokens, **(kwargs or {})}
    final_text = None
    if continue_final_message:
        messages, final_text = _tag_final_message(ct, messages)
    variables.update(
        messages=messages, tools=tools, documents=documents, add_generation_prompt=add_generation_prompt
    )
    text = None
    if ct.fast is not None:
        try:
            text = ct.fast.render(variables, max_chars)
        except FastRenderFailed:  # the sandbox answers (its own error, or the text)
            text = None
    if text is None:
        text = _run_budgeted(ct, variables, max_seconds, max_chars)
    if final_text is not None:
        text = _cut_at_tag(text, final_text)
    return text


def _run_budgeted(ct: CompiledTemplate, variables: dict[str, Any], max_seconds: float, max_chars: int) -> str:
    job = _WATCHDOG.add(max_seconds)
    try:
        try:
            return _generate(ct, variables, max_chars)
        finally:
            _WATCHDOG.remove(job)
    except _RenderTimeout:
        raise TemplateRenderError(
            f"chat template rendering exceeded its time budget ({max_seconds} s)"
        ) from None
    except _OutputTooLarge as exc:
        raise TemplateRenderError(f"chat template output exceeded its size budget: {exc}") from None
    except RecursionError:
        raise TemplateRenderError("chat template recursed too deeply") from None
    except MemoryError:
        raise TemplateRenderError("chat template ran out of memory") from None
    except TemplateRaised as exc:
        raise TemplateRenderError(str(exc)) from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateRenderError(f"chat template sandbox violation: {exc}") from None
    except (
        jinja2.TemplateError,
        TypeError,
        ValueError,
        AttributeError,
        KeyError,
        IndexError,
        ZeroDivisionError,
        OverflowError,
    ) as exc:
        raise TemplateDataError(f"chat template failed: {type(exc).__name__}: {exc}") from None


def _tag_final_message(
    ct: CompiledTemplate, messages: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], str]:
    if not messages:
        raise TemplateRenderError("continue_final_message is set but the conversation is empty")
    last = dict(messages[-1])
    content = last.get("content")
    if isinstance(content, list):
        parts = [dict(p) for p in content]
        for part in reversed(parts):
            if isinstance(part.get("text"), str):
                final = part["text"]
                part["text"] = final + CONTINUE_TAG
                break
        else:
            raise TemplateRenderError("continue_final_message is set but the final message has no text")
        last["content"] = parts
    elif isinstance(content, str):
        final = content
        last["content"] = content + CONTINUE_TAG
    else:
        raise TemplateRenderError(
            "continue_final_message is set but the final message has no content to continue"
        )
    return [*messages[:-1], last], final


def _cut_at_tag(text: str, final_text: str) -> str:
    tag = CONTINUE_TAG.strip()
    if final_text.strip() not in text or tag not in text:
        raise TemplateRenderError(
            "continue_final_message is set but the final message does not appear in the rendered chat "
            "(the chat template deletes part of it)"
        )
    loc = text.rindex(tag)
    if text[loc : loc + len(CONTINUE_TAG)] == CONTINUE_TAG:
        return text[:loc]
    return text[:loc].rstrip()
