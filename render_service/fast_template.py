"""A second, faster renderer for a chat template (``minijinja``, Rust), used only where proven.

:func:`compile_fast` compiles the template with ``minijinja`` in its Python-compatibility mode,
with the same environment options and helpers as :mod:`.chat_template` (``trim_blocks``,
``lstrip_blocks``, HF's ``tojson``, ``raise_exception``, ``strftime_now``, handed in by
:func:`.chat_template.fast_twin`); :func:`prove` then renders every input of :func:`probes` with
both engines. Only when every probe gives the same text (or both fail) does it
return a :class:`FastTemplate`; otherwise ``None`` and a log line saying why, and the jinja2
sandbox stays the only renderer.

At request time (:func:`.chat_template.render`) the fast renderer is tried first; any failure of
it (an error raised by the template, an unsupported construct, fuel spent) sends the request to
the jinja2 sandbox, so error answers, the time budget and the size budget are the sandbox's own.
The fast renderer is bounded by ``fuel`` (minijinja's instruction budget) and its output by the
same character budget.

Known difference the probes catch: minijinja prints a whole float as an integer (``5.0`` → ``5``),
jinja2 as Python does (``5.0``); gpt-oss's template prints tool-schema defaults that way, so it
keeps jinja2.

Source of the reference behaviour: transformers ``utils/chat_template_utils.py`` (5.x), the
environment :func:`.chat_template.make_environment` reproduces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)

FUEL = 50_000_000
"""minijinja instructions per render (chat_9k on Qwen3 uses about 0.1 M); past it the request is
rendered by the jinja2 sandbox, which enforces the wall-clock budget."""


class FastRenderFailed(Exception):
    """The fast renderer could not render this input; the caller uses the jinja2 sandbox."""


@dataclass(frozen=True, slots=True)
class FastTemplate:
    """A minijinja environment holding the template as ``"chat"``."""

    env: Any

    def render(self, variables: dict[str, Any], max_chars: int) -> str:
        """The rendered text for ``variables``.

        Raises:
            FastRenderFailed: minijinja raised anything (the template's own ``raise_exception``,
                an unsupported construct, fuel spent) or the text is over ``max_chars`` (the
                sandbox then raises its own size error).
        """
        try:
            text = self.env.render_template("chat", **variables)
        except Exception as exc:  # noqa: BLE001 - every failure is retried in the sandbox
            raise FastRenderFailed(str(exc)) from None
        if len(text) > max_chars:
            raise FastRenderFailed("over the size budget")
        return str(text)


def compile_fast(source: str, filters: dict[str, Any], functions: dict[str, Any]) -> FastTemplate | None:
    """``source`` compiled by minijinja with the sandbox's ``filters`` and global ``functions``
    (:func:`.chat_template.fast_twin` passes them), or ``None`` (minijinja missing, or the
    template uses something it does not parse, e.g. ``{% generation %}``)."""
    try:
        import minijinja
    except ImportError:
        return None
    env = minijinja.Environment(
        trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False, pycompat=True,
        undefined_behavior="lenient", fuel=FUEL,
    )
    for name, fn in filters.items():
        env.add_filter(name, fn)
    for name, fn in functions.items():
        env.add_global(name, fn)
    try:
        env.add_template("chat", source)
    except Exception:  # noqa: BLE001 - a syntax minijinja lacks: keep jinja2
        return None
    return FastTemplate(env)


def prove(fast: FastTemplate | None, reference: Any, special_tokens: dict[str, Any],
          inputs: list[dict[str, Any]] | None = None) -> FastTemplate | None:
    """``fast`` (from :func:`compile_fast`) when it renders every probe exactly as
    ``reference(variables) -> str`` (the jinja2 sandbox) does, else ``None``.

    A probe passes when both texts are equal, or the fast renderer raises (at request time the
    sandbox then answers, with its text or its error). It fails when the fast renderer gives
    another text, or a text where the sandbox raises. ``inputs`` defaults to :func:`probes`;
    each is completed with ``special_tokens`` (``bos_token`` ...).
    """
    if fast is None:
        logger.info("chat template: minijinja unavailable or cannot compile it; using the jinja2 sandbox")
        return None
    cases = inputs if inputs is not None else probes()
    fallbacks = 0
    for i, probe in enumerate(cases):
        variables = {**special_tokens, **probe}
        try:
            want: str | None = reference(variables)
        except Exception:  # noqa: BLE001 - the sandbox failing is an outcome to match
            want = None
        try:
            got: str | None = fast.render(variables, 1 << 30)
        except FastRenderFailed:
            got = None
        if got is None:
            fallbacks += want is not None
        elif got != want:
            logger.info("chat template: minijinja differs from the jinja2 sandbox on start-up probe %d; "
                        "using the jinja2 sandbox", i)
            return None
    if fallbacks * 2 > len(cases):
        logger.info("chat template: minijinja fails on %d of %d start-up probes (it would mostly add "
                    "work); using the jinja2 sandbox", fallbacks, len(cases))
        return None
    logger.info("chat template: minijinja proven identical on %d start-up probes (%d left to the "
                "sandbox); using it", len(cases) - fallbacks, fallbacks)
    return fast


_SCHEMA = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name, e.g. \"São Paulo\" <b>&</b> 'x'"},
        "days": {"type": "integer", "minimum": 1, "maximum": 14, "default": 3},
        "rate": {"type": "number", "description": "Rate.", "default": 5.0, "exclusiveMinimum": 0.5},
        "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
        "flags": {"type": "array", "items": {"type": "boolean"}, "default": [True, False]},
        "nested": {"type": "object", "properties": {"k": {"type": ["string", "null"]}}},
    },
    "required": ["city"],
}
_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather.\nTwo lines.",
                                      "parameters": _SCHEMA}},
    {"type": "function", "function": {"name": "noop", "description": "", "parameters": {
        "type": "object", "properties": {}}}},
]
_CALL = {"id": "call1AbCd", "type": "function",
         "function": {"name": "get_weather", "arguments": {"city": "Zürich", "days": 2, "rate": 1.5,
                                                           "flags": [True], "nested": {"k": None}}}}
_CALL_STR = {"id": "call2EfGh", "type": "function",
             "function": {"name": "noop", "arguments": "{\"a\": 1.0, \"b\": \"\\u00e9\"}"}}


def probes() -> list[dict[str, Any]]:
    """Template inputs covering what chat templates branch on: roles (system, developer, user,
    assistant, tool), tool lists with every JSON type (whole floats, ``null``, nested, non-ASCII,
    HTML characters), tool calls with dict and string arguments, reasoning, content part lists,
    empty and whitespace content, multi-turn histories, with and without a generation prompt."""
    text = "Hello <|im_start|> & <b>bold</b> 'q' \"dq\" \\ {{ x }} {% y %} ünïcødé 日本 🙂\n\n  end  "
    chats: list[list[dict[str, Any]]] = [
        [{"role": "user", "content": "Hi"}],
        [{"role": "system", "content": "You are terse."}, {"role": "user", "content": text}],
        [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"},
         {"role": "user", "content": "c"}],
        [{"role": "system", "content": "sys"}, {"role": "user", "content": "weather?"},
         {"role": "assistant", "content": "", "tool_calls": [_CALL]},
         {"role": "tool", "tool_call_id": "call1AbCd", "name": "get_weather", "content": "{\"t\": 21.0}"},
         {"role": "assistant", "content": "21 °C."}, {"role": "user", "content": "thanks"}],
        [{"role": "user", "content": "two calls"},
         {"role": "assistant", "content": "Calling.", "tool_calls": [_CALL, _CALL_STR]},
         {"role": "tool", "tool_call_id": "call1AbCd", "content": "one"},
         {"role": "tool", "tool_call_id": "call2EfGh", "content": "two"}],
        [{"role": "user", "content": "think"},
         {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nanswer", "reasoning_content": "hmm"},
         {"role": "user", "content": "again"},
         {"role": "assistant", "content": "final", "reasoning_content": "r2", "reasoning": "r2"}],
        [{"role": "user", "content": [{"type": "text", "text": "part one"},
                                      {"type": "text", "text": " part two"}]}],
        [{"role": "developer", "content": "dev rules"}, {"role": "user", "content": "  "}],
        [{"role": "user", "content": ""}, {"role": "assistant", "content": "", "tool_calls": [_CALL_STR]}],
        [{"role": "assistant", "content": "starts with assistant"}, {"role": "user", "content": "ok"}],
    ]
    out: list[dict[str, Any]] = []
    for i, messages in enumerate(chats):
        for tools in (None, _TOOLS):
            for gen in (True, False):
                extra = {"enable_thinking": False} if i % 3 == 1 else {}
                out.append({"messages": messages, "tools": tools, "documents": None,
                            "add_generation_prompt": gen, **extra})
    return out
