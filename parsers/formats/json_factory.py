"""Factory for the JSON tool-call families: a start marker, then a JSON call object or an
array of them, parsed by the shared :class:`parsers.jsoncalls.JsonCalls` body handler.

Used by llama3_json/llama4_json, granite, granite4, granite-20b-fc, internlm, jamba, xlam,
phi4_mini_json, hunyuan_a13b, ernie45, gigachat3 (and mistral with its own body handler).
One rule set for all of them, so batch == stream for any chunking:

* Text before the first call is content (streamed as it comes). Its trailing whitespace
  (``trim``) is withheld and dropped when a call follows; a whitespace-only content before a
  call is therefore ``None`` (vLLM engine parsers strip content when tools are called).
* ``after="drop"``: text after a call is dropped (vLLM: content = text before the first
  call) except further calls; ``after="content"``: text outside calls is content.
* A body that is not a call (invalid JSON, no name, truncated before its arguments) is
  text of the mode it started in (``reject_to_origin``): content before the first call (given
  back verbatim, never lost), dropped with the other text after a call when ``after="drop"``;
  scanning for calls continues.
* Arguments stream as the raw JSON text of the arguments value (spacing as generated;
  vLLM batch re-serialises: equal after ``json.loads``) and are never retracted.

Modes: ``C`` content before/between calls, ``B`` call body, ``A`` after a call.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from ..atomiccalls import AtomicCalls, BodyParser
from ..jsoncalls import JsonCalls
from ..spec import BODY, CONTENT, DROP, BodyHandler, FormatSpec, Transition

WHITESPACE = " \t\r\n"
#: Arguments keys accepted by most families (vLLM llama/internlm use "parameters").
ARGS_KEYS = ("arguments", "parameters")


def json_tool_spec(
    name: str,
    *,
    starts: tuple[str, ...] = (),
    opens: tuple[str, ...] = (),
    ends: tuple[str, ...] = (),
    drops: tuple[str, ...] = (),
    after: Literal["drop", "content"] = "drop",
    options: Mapping[str, Any] | None = None,
    trim: str | None = WHITESPACE,
    body: BodyHandler | None = None,
    call_id: Callable[[int, str], str] | None = None,
    guided_json: bool = True,
    extra_modes: Mapping[str, str] | None = None,
    extra_transitions: Mapping[tuple[str, str], Transition] | None = None,
    extra_markers: Mapping[str, str] | None = None,
) -> FormatSpec:
    """Build a JSON tool-call spec.

    Args:
        starts: markers that start a call body and are dropped (``<tool_calls>``).
        opens: markers that start a body and are its first text (llama ``{``, xlam ``[``).
        ends: closing markers dropped after a call (``</tool_calls>``).
        drops: markers dropped anywhere outside bodies (``<|python_tag|>``, ``</s>``).
        after: where text after a call goes (``"drop"`` or ``"content"``).
        options: ``JsonCalls`` options (``array``, ``args_keys``, ``require_args``, ``close``).
        trim: trailing characters of content withheld before a call (``None``: keep all).
        body: the body handler (default ``JsonCalls``).
        call_id / guided_json: see :class:`parsers.spec.FormatSpec`.
        extra_modes / extra_transitions / extra_markers: merged in for family specifics
            (marker names ``S<i>``/``O<i>``/``E<i>``/``D<i>``/``CLOSE`` are taken). A marker
            without transitions still matters: its token id is in ``marker_token_ids``, so
            the derender keeps that special token's text for a body handler to read.
    """
    markers = {f"S{i}": t for i, t in enumerate(starts)} | {f"O{i}": t for i, t in enumerate(opens)}
    markers |= {f"E{i}": t for i, t in enumerate(ends)} | {f"D{i}": t for i, t in enumerate(drops)}
    trans: dict[tuple[str, str], Transition] = {}
    for mode in ("C", "A"):
        trans |= {(mode, f"S{i}"): Transition("B") for i in range(len(starts))}
        trans |= {(mode, f"O{i}"): Transition("B", keep=True) for i in range(len(opens))}
        trans |= {(mode, f"D{i}"): Transition(mode) for i in range(len(drops))}
    # whitespace between a call's JSON and its closer belongs to the block: dropped
    trans |= {
        ("A", f"E{i}"): Transition("A" if after == "drop" else "C", release="drop") for i in range(len(ends))
    }
    hold = {} if trim is None else {"C": trim} | ({"A": trim} if after == "content" else {})
    if options and options.get("close"):  # matched by the body; listed so its token id is kept
        markers["CLOSE"] = options["close"]
    return FormatSpec(
        name=name,
        kind="tool",
        markers=markers | dict(extra_markers or {}),
        modes={"C": CONTENT, "B": BODY, "A": DROP if after == "drop" else CONTENT} | dict(extra_modes or {}),
        transitions=trans | dict(extra_transitions or {}),
        initial_mode="C",
        body=body or JsonCalls(),
        body_end_mode="A",
        reject_mode="C",
        body_options={"args_keys": ARGS_KEYS, **(options or {})},
        hold_trailing=hold,
        call_id=call_id,
        guided_json=guided_json,
        reject_to_origin=True,
    )


def atomic_tool_spec(
    name: str,
    starts: tuple[str, ...],
    end: str,
    parse: BodyParser,
    *,
    after: Literal["drop", "content"] = "content",
    drops: tuple[str, ...] = (),
    empty_ok: bool = False,
    typed: bool = False,
) -> FormatSpec:
    """A spec whose call blocks run from a marker in ``starts`` to ``end`` and are parsed whole
    by ``parse`` (:class:`parsers.atomiccalls.AtomicCalls`); text around the blocks as
    :func:`json_tool_spec` (content before, ``after`` after; rejected blocks are text of the
    mode they started in). A block without ``end`` is parsed at the end of the stream.
    ``typed``: ``parse`` takes the tool context too (the caller sets ``tool_context``)."""
    return json_tool_spec(
        name,
        starts=starts,
        drops=drops,
        after=after,
        body=AtomicCalls(parse, empty_ok=empty_ok, typed=typed),
        extra_markers={"END": end},
        extra_transitions={("B", "END"): Transition("A")},
    )
