"""The README's "Deliberate differences", one normaliser each, plus fields that vary per call.

A normaliser takes ``(area, ours, theirs)`` (JSON values, already copied) and returns them with
the deliberate difference removed. Each carries the README line it stands for, so a normaliser
exists only where the README says why we differ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .compare import diff_paths

Json = Any
#: the areas of a derender kind
DERENDER = ("derender batch", "derender stream")


@dataclass(frozen=True)
class Normaliser:
    name: str
    readme: str  # the README line (section "Deliberate differences from vLLM 0.33") or reason
    areas: tuple[str, ...]
    #: the whole normalisation; the default leaves both answers as they are (a kind recognised
    #: only by ``apply_with_input``, or only by a check in ``run.py``)
    apply: Callable[[Json, Json], tuple[Json, Json]] = lambda ours, theirs: (ours, theirs)
    #: the case's input (``example`` of ``run.Run.record``: output text, chat request), for
    #: normalisers that must check the input to recognise their kind
    apply_with_input: Callable[[Json, Json, Json], tuple[Json, Json]] | None = None


def _walk(value: Json, fn: Callable[[dict[str, Any]], None]) -> None:
    if isinstance(value, dict):
        fn(value)
        for v in value.values():
            _walk(v, fn)
    elif isinstance(value, list):
        for v in value:
            _walk(v, fn)


def _volatile(ours: Json, theirs: Json) -> tuple[Json, Json]:
    def drop(d: dict[str, Any]) -> None:
        if "created" in d and isinstance(d.get("created"), int):
            d["created"] = 0
    _walk(ours, drop)
    _walk(theirs, drop)
    for side in (ours, theirs):
        if isinstance(side, dict) and isinstance(side.get("request_id"), str):
            side["request_id"] = "<random>"
        if isinstance(side, list):
            for item in side:
                if isinstance(item, dict) and isinstance(item.get("request_id"), str):
                    item["request_id"] = "<random>"
    return ours, theirs


def _tool_ids(ours: Json, theirs: Json) -> tuple[Json, Json]:
    def fix(d: dict[str, Any]) -> None:
        for call in d.get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") is not None:
                call["id"] = "<tool-call-id>"
    _walk(ours, fix)
    _walk(theirs, fix)
    return ours, theirs


def _sampling(side: Json) -> list[dict[str, Any]]:
    items = side if isinstance(side, list) else [side]
    return [i["sampling_params"] for i in items
            if isinstance(i, dict) and isinstance(i.get("sampling_params"), dict)]


def _max_tokens(ours: Json, theirs: Json) -> tuple[Json, Json]:
    for o, t in zip(_sampling(ours), _sampling(theirs), strict=False):
        if "max_tokens" in o and t.get("max_tokens") is None:
            o.pop("max_tokens")
            t.pop("max_tokens", None)
    return ours, theirs


def _stop_strings(ours: Json, theirs: Json) -> tuple[Json, Json]:
    for o, t in zip(_sampling(ours), _sampling(theirs), strict=False):
        if "stop" not in o or o.get("stop") in (None, []):
            o.pop("stop", None)
            t.pop("stop", None)
            # vLLM holds back max(len(stop)) - 1 characters for the stop strings it was sent
            if "output_text_buffer_length" not in o:
                t.pop("output_text_buffer_length", None)
    return ours, theirs


def _logprob_bytes(ours: Json, theirs: Json) -> tuple[Json, Json]:
    def entries(side: Json) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []
        _walk(side, lambda d: found.append(d) if "bytes" in d and "token" in d else None)
        return found
    for o, t in zip(entries(ours), entries(theirs), strict=False):
        if o.get("bytes") != t.get("bytes"):
            o.pop("bytes")
            t.pop("bytes")
    return ours, theirs


def _answers(side: Json) -> list[dict[str, Any]]:
    """The message-like dicts of a side: ``choices[].message`` of a batch answer, or the whole
    aggregated stream (``{"reasoning", "content", "tool_calls", "finish_reason", ...}``)."""
    if isinstance(side, dict) and isinstance(side.get("choices"), list):
        return [c for c in side["choices"] if isinstance(c, dict)]
    return [side] if isinstance(side, dict) and "reasoning" in side else []


def _msg(choice: dict[str, Any]) -> dict[str, Any]:
    m = choice.get("message")
    return m if isinstance(m, dict) else choice


def _calls(m: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [((c.get("function") or {}).get("name"), (c.get("function") or {}).get("arguments"))
            for c in m.get("tool_calls") or [] if isinstance(c, dict)]


def _take_theirs(o: dict[str, Any], t: dict[str, Any], keys: Any, finish: bool = True) -> None:
    """Make our answer ``o`` carry vLLM's ``keys`` of the message (absent where vLLM's is), and
    vLLM's ``finish_reason`` when ``finish``: the one step every deliberate kind ends with once it
    has recognised its case."""
    mo, mt = _msg(o), _msg(t)
    for key in keys:
        if key in mt:
            mo[key] = mt[key]
        else:
            mo.pop(key, None)
    if finish and "finish_reason" in t:
        o["finish_reason"] = t["finish_reason"]


DRAFT_START = "<tool_call>"


def _hidden_reasoning(example: Json) -> bool:
    req = (example or {}).get("chat_request") if isinstance(example, dict) else None
    return isinstance(req, dict) and req.get("include_reasoning") is False


def _draft_call_in_reasoning(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: a tool call written inside reasoning that reasoning goes on after (more reasoning
    text, ``</think>``) is a draft and stays reasoning (bug case BR25); vLLM's qwen3 grammar ends
    reasoning at the first ``<tool_call>`` whatever follows. Recognised exactly: vLLM's reasoning
    is a prefix of ours and ours goes on with ``<tool_call>`` right there; vLLM moved text from
    that point out of reasoning (calls or content); our calls are among vLLM's (the calls after
    ``</think>``) and our content, if any, is part of vLLM's content. Then the reasoning,
    content, tool calls and finish reason of both sides are taken as equal. With
    ``include_reasoning: false`` (no reasoning on either side) the output text must hold a
    ``<tool_call>`` with no ``</think>`` before it instead of the prefix check."""
    text = example.get("output_text", "") if isinstance(example, dict) else ""
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        ro, rt = mo.get("reasoning") or "", mt.get("reasoning") or ""
        if not ro and not rt and _hidden_reasoning(example):
            first = text.find(DRAFT_START)
            if first < 0 or "</think>" in text[:first]:
                continue
        elif not (ro.startswith(rt) and ro[len(rt):].startswith(DRAFT_START)):
            continue
        co, ct = mo.get("content") or "", mt.get("content") or ""
        calls_o, calls_t = _calls(mo), _calls(mt)
        if not (calls_t or DRAFT_START in ct):
            continue
        if any(c not in calls_t for c in calls_o) or (len(calls_o) >= max(1, len(calls_t)) \
                and DRAFT_START not in ct):
            continue
        # a bare ``<tool_call>`` left open at the end: vLLM's stream holds it back and drops it
        if co.strip() and co.strip() not in ct and not (co.strip() == DRAFT_START and not ct):
            continue
        _take_theirs(o, t, ("reasoning", "content", "tool_calls"))
    return ours, theirs


def _structured_output_undecided(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: with ``response_format`` / ``structured_outputs`` and an output without
    ``</think>``, a think-style reasoning parser starts undecided, so text before a tool-call
    start or the end is content (vLLM: reasoning). Recognised exactly: the request asks for a
    JSON/structured output, the output text has no ``</think>``, our reasoning is empty, and our
    content is vLLM's reasoning followed by vLLM's content; the calls are compared as they are."""
    req = example.get("chat_request") if isinstance(example, dict) else None
    if not isinstance(req, dict) or "</think>" in example.get("output_text", "") or not (
            (req.get("response_format") or {}).get("type") in ("json_object", "json_schema")
            or req.get("structured_outputs")):
        return ours, theirs
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        rt, ct = mt.get("reasoning") or "", mt.get("content") or ""
        if mo.get("reasoning") or not rt or (mo.get("content") or "") != rt + ct:
            continue
        _take_theirs(o, t, ("reasoning", "content"), finish=False)
    return ours, theirs


def _open_header_at_end(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README "Output is never lost" (an unterminated header is given back as content): a bare
    ``<tool_call>`` with only whitespace after it ends the output; ours ends its content with it,
    vLLM drops it. Recognised exactly: the output text's tail from its last ``<tool_call>`` is
    that marker and whitespace (or the output was cut by ``length``), and our content without it
    equals vLLM's content (whitespace at the cut aside)."""
    text = example.get("output_text", "") if isinstance(example, dict) else ""
    at = text.rfind(DRAFT_START)
    # a ``length`` cut ends the output anywhere: the marker may be the last whole token kept
    cut = isinstance(example, dict) and example.get("finish") == "length"
    if at < 0 or (text[at:].strip() != DRAFT_START and not cut):
        return ours, theirs
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        co, ct = (mo.get("content") or "").rstrip(), mt.get("content") or ""
        if co.endswith(DRAFT_START) and co[: -len(DRAFT_START)].strip() == ct.strip():
            mo["content"] = mt.get("content")
    return ours, theirs


MISTRAL_BOT = "[TOOL_CALLS]"


def _mistral_later_blocks(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: Mistral (pre-v11 ``[TOOL_CALLS][...]``) calls after a later ``[TOOL_CALLS]`` are
    calls too; vLLM reads only the first non-empty segment after a ``[TOOL_CALLS]`` and drops
    the rest. Recognised exactly: the output holds two or more non-empty ``[TOOL_CALLS]``
    segments, vLLM's calls are the first of ours, each extra call of ours is named in a later
    segment, and vLLM's content is ours or the first segment's text (not a call)."""
    text = example.get("output_text", "") if isinstance(example, dict) else ""
    segments = [seg for seg in text.split(MISTRAL_BOT)[1:] if seg.strip()]
    if len(segments) < 2:
        return ours, theirs
    later = MISTRAL_BOT.join(segments[1:])
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        calls_o, calls_t = _calls(mo), _calls(mt)
        if len(calls_o) <= len(calls_t) or calls_o[:len(calls_t)] != calls_t:
            continue
        if any(f'"{name}"' not in later for name, _ in calls_o[len(calls_t):]):
            continue
        co, ct = (mo.get("content") or "").strip(), (mt.get("content") or "").strip()
        if co != ct and not (not calls_t and ct == segments[0].strip()):
            continue
        _take_theirs(o, t, ("content", "tool_calls"))
    return ours, theirs


def _no_space(text: str) -> str:
    return "".join(text.split())


def _mistral_unparsed_block(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: Mistral, a ``[TOOL_CALLS]`` whose block never becomes a call (cut by ``length``
    inside it, or text that is no JSON): ours is the whole output without the markers; vLLM's
    batch keeps only the first segment after the marker (dropping the text before it) and its
    stream only the text before it. Recognised exactly: no calls on either side, ours (spaces
    aside) is a prefix of the output with its ``[TOOL_CALLS]`` markers taken out, and vLLM's
    content is a shorter part of ours."""
    text = example.get("output_text", "") if isinstance(example, dict) else ""
    if MISTRAL_BOT not in text:
        return ours, theirs
    kept = _no_space(text.replace(MISTRAL_BOT, ""))
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        if _calls(mo) or _calls(mt):
            continue
        co, ct = _no_space(mo.get("content") or ""), _no_space(mt.get("content") or "")
        if co and kept.startswith(co) and ct in co:
            _take_theirs(o, t, ("content",), finish=False)
    return ours, theirs


def _mistral_forced_text(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: Mistral under ``tool_choice`` required / named, an output that is not a call is
    content as generated; vLLM's batch strips the whitespace around it (its stream drops it).
    Recognised exactly: a forced choice, no calls on either side, the same text apart from
    whitespace at its ends."""
    if not isinstance(example, dict) or "mistral" not in str(example.get("model", "")).lower():
        return ours, theirs
    req = example.get("chat_request")
    choice = req.get("tool_choice") if isinstance(req, dict) else None
    if not (choice == "required" or isinstance(choice, dict)) or not req.get("tools"):
        return ours, theirs
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        if _calls(mo) or _calls(mt):
            continue
        co, ct = mo.get("content") or "", mt.get("content") or ""
        if co != ct and co.strip() == ct.strip():
            _take_theirs(o, t, ("content",), finish=False)
    return ours, theirs


HARMONY_STOP = "<|return|>"
_HARMONY_MESSAGE = "<|message|>"
_HARMONY_ENDS = ("<|end|>", "<|call|>", "<|return|>")


def _harmony_lone_stop(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: a gpt-oss output whose first header never completes (plain text, or nothing)
    ending with the stop token ``<|return|>``: the text is content without the stop token; vLLM's
    harmony parser fails on the header and recovers the raw output with the stop token's text.
    Recognised exactly: the output text has no ``<|message|>``, it ended with the appended end
    token (``finish: stop``), and vLLM's content is ours followed by ``<|return|>``."""
    if not isinstance(example, dict) or _HARMONY_MESSAGE in example.get("output_text", "") \
            or example.get("finish") != "stop":
        return ours, theirs
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        if mt.get("content") == (mo.get("content") or "") + HARMONY_STOP:
            mo["content"] = mt["content"]
    return ours, theirs


def _harmony_repeated_start(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README: a gpt-oss output whose first header holds ``<|start|>`` (``<|start|>assistant``
    again, the prompt already ends with it, or text before it) keeps its first message; vLLM's
    harmony parser rejects that header and drops the whole first message (a call, reasoning or
    text). Recognised exactly: the first header holds ``<|start|>``; taking the first message
    (its call, or its text from reasoning or content) out of ours leaves vLLM's answer."""
    text = example.get("output_text", "") if isinstance(example, dict) else ""
    if _HARMONY_MESSAGE not in text:
        return ours, theirs
    header, body = text.split(_HARMONY_MESSAGE, 1)
    if "<|start|>" not in header:
        return ours, theirs
    first = min((body.find(e) for e in _HARMONY_ENDS if e in body), default=len(body))
    msg_text = body[:first]
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        calls_o, calls_t = _calls(mo), _calls(mt)
        same: dict[str, Any] = {}
        if "to=" in header:
            if calls_o[1:] != calls_t or not calls_o:
                continue
            same["tool_calls"] = True
        else:
            key = "reasoning" if "analysis" in header else "content"
            got, want = mo.get(key) or "", mt.get(key) or ""
            if got not in (msg_text + ("\n" + want if want else ""),) or calls_o != calls_t:
                continue
            same[key] = True
        _take_theirs(o, t, same)
    return ours, theirs


def _malformed_block_kept(ours: Json, theirs: Json) -> tuple[Json, Json]:
    """README "Output is never lost": a ``<tool_call>`` block that never becomes a call (no
    ``<function=``/JSON body, no ``</tool_call>``) is given back as content; vLLM drops
    everything from the ``<tool_call>`` on. Recognised exactly: the calls are equal and our
    content is vLLM's followed by text that starts with ``<tool_call>`` and holds neither
    ``<function=`` nor ``{``, nor ``</tool_call>`` other than one closing it at the very end
    (qwen3_coder ``<tool_call>Hello</tool_call>`` under a named tool choice)."""
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        co, ct = mo.get("content") or "", mt.get("content") or ""
        if _calls(mo) != _calls(mt) or not co.startswith(ct.rstrip()):
            continue
        tail = co[len(ct.rstrip()):].lstrip()
        body = tail.rstrip()
        body = body[: -len("</tool_call>")] if body.endswith("</tool_call>") else body
        if tail.startswith(DRAFT_START) and not any(x in body for x in ("<function=", "</tool_call>", "{")):
            mo["content"] = mt.get("content")
    return ours, theirs


JSON_CALL_STARTS = ("{", "<|python_tag|>")


def _text_before_json_call(ours: Json, theirs: Json, example: Json) -> tuple[Json, Json]:
    """README "Deliberate differences" (llama3_json, text before the first call): vLLM's batch
    drops it (content null, ``""`` under ``required`` / named) and its stream gives the whole
    output as content with no calls; ours keeps the text as content and the calls. Recognised
    exactly: the calls are equal, vLLM's content is empty, ours is non-empty and is the output's
    text up to the first call (what follows it, after whitespace, starts with ``{`` or
    ``<|python_tag|>``)."""
    text = (example or {}).get("output_text") if isinstance(example, dict) else None
    if not isinstance(text, str):
        return ours, theirs
    for o, t in zip(_answers(ours), _answers(theirs), strict=False):
        mo, mt = _msg(o), _msg(t)
        co = mo.get("content")
        if not _calls(mo) or _calls(mo) != _calls(mt) or mt.get("content") not in (None, ""):
            continue
        if isinstance(co, str) and co.strip() and text.startswith(co) \
                and text[len(co):].lstrip().startswith(JSON_CALL_STARTS):
            mo["content"] = mt.get("content")
    return ours, theirs


NORMALISERS: tuple[Normaliser, ...] = (
    Normaliser("volatile", "not a difference: `created` is the clock, render's `request_id` is "
               "random on both sides", ("render", "derender batch", "derender stream"), _volatile),
    Normaliser("tool_call_ids", "Tool-call ids are stable across retries and replicas (vLLM mints "
               "random ids, #57571).", DERENDER, _tool_ids),
    Normaliser("max_tokens", "`max_tokens` is always present in rendered `sampling_params` (vLLM "
               "drops it when it equals 16, ...)", ("render",), _max_tokens),
    Normaliser("stop_strings", "Stop strings work in streaming derender (vLLM refuses them with "
               "400) and are not sent to the engine.", ("render",), _stop_strings),
    Normaliser("strict_not_in_template", "A tool's `strict` (an OpenAI-only field) is not handed "
               "to the chat template (run.render_one compares the prompt with vLLM's prompt for the "
               "request without `strict`)", ()),
    Normaliser("calls_kept", "Because a stream cannot take back what it sent ... a tool call whose "
               "name was already emitted stays a call (run.calls_kept: vLLM's batch gives the whole "
               "output back as content)", ()),
    Normaliser("draft_call_in_reasoning", "A tool call drafted inside reasoning (more reasoning "
               "text or `</think>` after it) stays reasoning (bug case BR25) ...",
               DERENDER,
               apply_with_input=_draft_call_in_reasoning),
    Normaliser("structured_output_undecided", "With `response_format` / `structured_outputs` a "
               "think-style reasoning parser starts undecided: an answer with no reasoning markers "
               "is content ...", DERENDER,
               apply_with_input=_structured_output_undecided),
    Normaliser("open_header_at_end", "Output is never lost: ... an unterminated header) is given "
               "back as content (vLLM drops it)", DERENDER,
               apply_with_input=_open_header_at_end),
    Normaliser("mistral_later_blocks", "Mistral: a call block after a later `[TOOL_CALLS]` is a "
               "call too ...", DERENDER,
               apply_with_input=_mistral_later_blocks),
    Normaliser("mistral_unparsed_block", "Mistral: a `[TOOL_CALLS]` block that never becomes a "
               "call ... is content with the text before it", DERENDER,
               apply_with_input=_mistral_unparsed_block),
    Normaliser("mistral_forced_text", "Mistral under `required` / named: an output that is not "
               "a call is content as generated ...", DERENDER,
               apply_with_input=_mistral_forced_text),
    Normaliser("harmony_lone_stop", "gpt-oss: an output whose first header never completes ... "
               "is content without the stop token ...", DERENDER,
               apply_with_input=_harmony_lone_stop),
    Normaliser("harmony_repeated_start", "gpt-oss: an output whose first header holds "
               "`<|start|>` ... keeps its first message ...", DERENDER,
               apply_with_input=_harmony_repeated_start),
    Normaliser("malformed_block_kept", "Output is never lost: a malformed tool-call block ... is "
               "given back as content (vLLM drops it)", DERENDER,
               _malformed_block_kept),
    Normaliser("text_before_json_call", "`llama3_json`: text before the first call is content "
               "and the calls are calls ... (vLLM's batch drops the text, its stream drops the "
               "calls)", ("derender batch",),
               apply_with_input=_text_before_json_call),
    Normaliser("logprob_bytes", "Logprob `bytes` are each token's own raw bytes, ...",
               DERENDER, _logprob_bytes),
)

# Whole cases the README says we answer differently (checked on the raw inputs, not normalised).
STREAM_STOP_README = ("Stop strings work in streaming derender (vLLM refuses them with 400) and "
                      "are not sent to the engine.")


def normalise(area: str, ours: Json, theirs: Json,
              example: Json = None) -> tuple[Json, Json, list[str]]:
    """Apply every normaliser of ``area`` (``example``: the case's input, for the normalisers
    that check it); returns the values and the names that changed something."""
    import copy

    ours, theirs = copy.deepcopy(ours), copy.deepcopy(theirs)
    used = []
    for n in NORMALISERS:
        if area not in n.areas:
            continue
        before = len(diff_paths(ours, theirs))
        ours, theirs = n.apply(ours, theirs)
        if n.apply_with_input is not None:
            ours, theirs = n.apply_with_input(ours, theirs, example)
        # used = it removed a real difference (not merely touched a field equal on both sides)
        if n.name != "volatile" and len(diff_paths(ours, theirs)) < before:
            used.append(n.name)
    return ours, theirs, used
