"""``mistral`` tool calls (Mistral / Mixtral / Magistral / Devstral; vLLM 0.33 ``MistralParser``).

Wire formats after the ``[TOOL_CALLS]`` control token:

* pre-v11: a JSON array ``[{"name": "f", "arguments": {..}}, ..]`` (or one bare object);
  ``arguments`` may come before ``name``.
* v11+: ``name[ARGS]{json}`` or ``name{json}``, ``[TOOL_CALLS]`` repeated per call; the
  arguments are the JSON value verbatim (a truncated value is kept as generated).

Content = text before the first ``[TOOL_CALLS]`` (trailing whitespace dropped when a call
follows, so whitespace-only content is ``None``, as vLLM's v11+ engine; its pre-v11 parser keeps
that whitespace: an open kind); text after a call's JSON is dropped (gh#48975) except further
``[TOOL_CALLS]``. A ``[TOOL_CALLS]`` followed by something that is neither JSON nor a function
name is not a call: that text stays content (the control token itself is dropped); repeated
markers with only whitespace between them count as one, as in vLLM 0.33.

Ids: Mistral requires 9 alphanumeric characters (BR43). vLLM draws them at random; ours are
derived from the call's position in the conversation (``history_tool_call_cnt`` + index) and
its name, so a retried or replayed chunk gets the same id and calls of one conversation get
different ids. ``tool_choice`` required/named parse the native syntax (vLLM
``supports_required_and_named = False``), or the bare JSON array vLLM's guided schema makes
pre-v11 models emit.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from ..jsoncalls import JsonCalls
from ..spec import CONTENT, Event, Transition
from .json_factory import WHITESPACE, json_tool_spec

_JSON = JsonCalls()
_ARGS = "[ARGS]"
_MARKER = "[TOOL_CALLS]"
_NAME = re.compile(r"\s*[\w.\-:/]*\s*")
#: Longer text without ``{`` / ``[ARGS]`` is not a function name (keeps per-chunk work flat).
MAX_NAME = 256
_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mistral_id(position: int, name: str) -> str:
    """A 9-character alphanumeric id from the call's conversation position and name."""
    value = int.from_bytes(hashlib.blake2b(f"{position}:{name}".encode(), digest_size=8).digest(), "big")
    out = []
    for _ in range(9):
        value, digit = divmod(value, len(_ALPHABET))
        out.append(_ALPHABET[digit])
    return "".join(out)


class MistralCalls:
    """Body handler for the text after ``[TOOL_CALLS]`` (see module docstring).

    State: ``m`` phase (``""`` undecided, ``"name"``, ``"json"`` pre-v11, ``"args"`` v11
    arguments), ``nm`` text read so far before the JSON; in the JSON phases the
    :class:`JsonCalls` state keys are merged into the same flat dict. A rejected body gives
    back its text without the ``[TOOL_CALLS]`` control token and the whitespace after it
    (vLLM pre-v11: ``[TOOL_CALLS] not json`` → content ``not json``).
    """

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body state after ``marker``."""
        return {"m": "", "nm": ""}

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Route to the pre-v11 JSON scan or read the v11 name; see ``BodyHandler.feed``."""
        if st["m"] in ("json", "args"):
            return _JSON.feed(st, text)
        if st["m"] == "":
            body = _after_markers(st["nm"] + text)
            if not body or _MARKER.startswith(body):  # whitespace, or maybe a repeated marker
                st["nm"] += text
                return [], None
            lead = len(text) - len(body)  # < 0 when the body began in the held text
            if body[0] in "[{":
                st.update(_JSON.start("", {"array": body[0] == "[", "decode_string_args": True}), m="json")
                events, end = _JSON.feed(st, body)
                return events, None if end is None else end + lead
            st["m"] = "name"
        return self._name(st, text)

    def finish(self, st: dict[str, Any]) -> list[Event]:
        """End of stream: close the JSON scan, or give back an unfinished name as content."""
        if st["m"] in ("json", "args"):
            return _JSON.finish(st)
        return [("reject", _after_markers(st["nm"]))]

    def _name(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        before = len(st["nm"])
        name_text = st["nm"] + text
        bad = _bad_at(name_text)
        if bad is not None:
            cut = max(bad, before)
            return [("reject", name_text[:cut].lstrip())], cut - before
        cuts = [k for k in (name_text.find(_ARGS), name_text.find("{")) if k >= 0]
        if not cuts and len(name_text) > MAX_NAME:
            return [("reject", name_text.lstrip())], len(text)
        if not cuts:
            st["nm"] = name_text
            return [], None
        k = min(cuts)
        rest = k + (len(_ARGS) if name_text.startswith(_ARGS, k) else 0)
        st.update(_JSON.start(name_text[:rest].lstrip(), {"fixed_name": name_text[:k].strip()}), m="args")
        events, end = _JSON.feed(st, name_text[rest:])
        return events, None if end is None else rest + end - before


def _after_markers(text: str) -> str:
    """``text`` without its leading whitespace and ``[TOOL_CALLS]`` markers (vLLM 0.33: repeated
    markers with nothing but whitespace between them count as one)."""
    body = text.lstrip()
    while body.startswith(_MARKER):
        body = body[len(_MARKER):].lstrip()
    return body


def _bad_at(name_text: str) -> int | None:
    """Index where ``name_text`` stops being ``name``, ``name[ARGS]…`` or ``name{…``, if any."""
    end = _NAME.match(name_text).end()  # type: ignore[union-attr]
    tail = name_text[end:]
    if not tail or tail[0] == "{" or tail.startswith(_ARGS) or _ARGS.startswith(tail):
        return None
    return end


_NATIVE = json_tool_spec(
    "mistral",
    starts=("[TOOL_CALLS]",),
    body=MistralCalls(),
    call_id=mistral_id,
    guided_json=False,
    extra_markers={"ARRAY": "[", "ARGS": _ARGS},  # [ARGS] is read by the body: keep its token
    extra_modes={"F": CONTENT},
    extra_transitions={("F", "S0"): Transition("B"), ("F", "ARRAY"): Transition("B", keep=True)},
)
#: Forced tool choice (required/named): vLLM constrains pre-v11 tokenizers to a bare JSON array
#: ``[{"name", "arguments"}]`` (no ``[TOOL_CALLS]``) and v11+ to the native syntax; both are
#: accepted at the start of the output (mode ``F``), anything else is content.
SPEC = replace(
    _NATIVE,
    forced_mode="F",
    break_on_text={"F": Transition("C")},
    hold_trailing={**_NATIVE.hold_trailing, "F": WHITESPACE},
    # vLLM 0.33's Mistral parser is an engine adapter: without tools (tool_choice "none") it
    # still runs and drops its markup (measured by the differential harness: ``[TOOL_CALLS]!`` -> ``!``)
    strip_on_none=True,
    # ... but with tools and tool_choice "none" its batch gives the output back whole
    # (``[TOOL_CALLS]![INST]`` stays content; its stream drops the text after the marker)
    raw_on_none_with_tools=True,
)
