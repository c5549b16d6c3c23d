"""The one per-choice output pipeline shared by batch and streaming derender.

    ids ─ drop stop token ─ detokenize ─ stop strings (after min_tokens) ─ parser ─ deltas

:func:`advance` is a pure step over :class:`~render_service.protocol.derender.StreamState`:
it takes the *new* ids of one choice and returns that step's output and the next state. Batch
derender is one ``advance`` with every id and ``final=True``; streaming is one per chunk, so
the two agree by construction (no replay; cost O(new ids)).

Behaviour sources: upstream §7.3 (stop-token drop, stop strings, ``min_tokens``), §7.5/§7.6
(finish_reason, tool-call ids), ``parsers/README.md`` (parser calls).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..fingerprint import FINGERPRINT_CHARS, config_fingerprint, fingerprint_key
from ..models import ModelBundle
from ..parsing import parser_for
from ..protocol.derender import StreamState
from ..settings import Settings
from ..tokens.tokenization import decode, vocab_lookup
from . import detokenize, logprobs, stop_strings
from .detokenize import Detokenizer, DetokState
from .reasoning_tokens import NONE, Counting, counting_for
from .stream_state import StateCache


@dataclass(frozen=True, slots=True)
class Pipeline:
    """Per-bundle, per-settings facts, built once (:func:`pipeline_for`)."""

    detok: Detokenizer
    parser: Any
    special_ids: frozenset[int]
    eos_id: int | None
    model_eos_ids: frozenset[int]
    fingerprint: str
    #: Keys that sign (first) and verify ``stream_state`` (:func:`state_keys`).
    state_keys: tuple[str, ...] = ()
    #: States this process handed out, by their text (resumed without decoding).
    states: StateCache = field(default_factory=StateCache, compare=False, repr=False)
    #: The reasoning-token counting rule of the configured reasoning parser (Responses usage).
    counting: Counting = NONE
    #: ``--max-stream-state-bytes``: the largest state a caller may send back, so the largest
    #: this process hands out.
    max_state_bytes: int = 1024 * 1024
    #: :meth:`drop_ids` by (a parser reads the stream, ``skip_special_tokens``), made once.
    _drops: dict[tuple[bool, bool], frozenset[int]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        kept = self.kept_ids()
        drops = {(parsed, skip): detokenize.drop_set(self.special_ids, kept if parsed else None, skip)
                 for parsed in (False, True) for skip in (False, True)}
        object.__setattr__(self, "_drops", drops)

    def kept_ids(self) -> frozenset[int] | None:
        """The special ids a chat parse keeps as text even where the parser drops special tokens
        (its markers; ``None``: no parser)."""
        return None if self.parser is None else self.parser.marker_token_ids

    def drop_ids(self, skip_special_tokens: bool, parsed: bool = True) -> frozenset[int]:
        """The ids a step leaves out of the text (:func:`.detokenize.drop_set` of this pipeline's
        special ids, and its kept ids where a parser reads the stream), for the request's
        ``skip_special_tokens``."""
        return self._drops[(parsed, skip_special_tokens)]

    @property
    def cfg(self) -> str:
        """The fingerprint prefix carried in states."""
        return self.fingerprint[:FINGERPRINT_CHARS]


@dataclass(slots=True)
class StepOutput:
    """What one step produced for one choice. ``tool_calls`` are OpenAI delta tool calls."""

    content: str = ""
    reasoning: str = ""
    #: the parser reported reasoning ``""`` (a reasoning section without text; vLLM's batch R1
    #: family gives ``""``, not null: ``parsers.FormatSpec.empty_reasoning``)
    empty_reasoning: bool = False
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: int | str | None = None
    stop_generation: bool = False
    logprobs: dict[str, Any] | None = None


def pipeline_for(bundle: ModelBundle, settings: Settings) -> Pipeline:
    """The pipeline of a bundle under given settings, built once and kept by the bundle
    (:class:`~render_service.models.BundleMemo`; the parser built once too)."""
    return bundle.memo.get("pipeline", settings, lambda: _new_pipeline(bundle, settings))


def _new_pipeline(bundle: ModelBundle, settings: Settings) -> Pipeline:
    tok = bundle.tokenizer
    fingerprint = config_fingerprint(bundle, settings)
    pipe = Pipeline(
        detok=detokenize.detokenizer_for(tok),
        parser=parser_for(bundle, settings),
        # skip_special_tokens skips the tokenizer's ``all_special_ids`` (bos/eos/unk/pad and the
        # additional special tokens), not every added token flagged special: vLLM 0.33's
        # detokenizer (``convert_ids_to_tokens(skip_special_tokens=True)``) keeps e.g. Llama's
        # ``<|python_tag|>``, Mistral's ``[TOOL_CALLS]`` and harmony's ``<|channel|>`` as text.
        special_ids=frozenset(int(i) for i in tok.all_special_ids),
        eos_id=tok.eos_token_id,
        model_eos_ids=bundle.eos_token_ids,
        fingerprint=fingerprint,
        state_keys=state_keys(settings, fingerprint),
        max_state_bytes=settings.max_stream_state_bytes,
        counting=counting_for(
            settings.reasoning_parser,
            vocab_lookup(bundle),
            frozenset(int(i) for i in tok.all_special_ids),
            lambda ids: decode(bundle, ids),
        ),
    )
    return pipe


def state_keys(settings: Settings, fingerprint: str) -> tuple[str, ...]:
    """The stream-state signing policy: the configured ``stream_state_keys`` (first signs, any
    verifies); none configured and ``allow_unsigned_stream_state`` → ``()`` (unsigned); none
    configured otherwise → the one key derived from the configuration fingerprint
    (:func:`~render_service.fingerprint.fingerprint_key`), so replicas started with the same
    flags accept each other's states and a replica with another model, template or parsers
    rejects them."""
    if settings.stream_state_keys or settings.allow_unsigned_stream_state:
        return settings.stream_state_keys
    return (fingerprint_key(fingerprint),)


def tool_call_id(request_id: str, choice_index: int, call_index: int) -> str:
    """Deterministic ``chatcmpl-tool-<16 hex>``: a retried chunk gets the same id on any replica
    (upstream ids are random per call: vLLM #57571)."""
    digest = hashlib.sha256(f"{request_id}\x00{choice_index}\x00{call_index}".encode()).hexdigest()
    return f"chatcmpl-tool-{digest[:16]}"


def drop_stop_token(
    pipe: Pipeline,
    st: StreamState,
    ids: Sequence[int],
    finish_reason: str | None,
    stop_reason: int | str | None,
) -> tuple[Sequence[int], int | str | None]:
    """Leave the token that stopped generation out of the text (never out of ``token_ids``,
    usage or logprobs), as upstream ``_drop_stop_token`` (§7.3). Returns the ids to decode and
    the ``stop_reason`` (set to the id when a request stop id or model EOS stopped it)."""
    if finish_reason != "stop" or isinstance(stop_reason, str) or not ids:
        return ids, stop_reason
    last = ids[-1]
    if stop_reason is None:
        honor_eos = not st.ignore_eos
        if honor_eos and last == pipe.eos_id:
            stopped = True
        elif last in st.stop_ids or (honor_eos and last in pipe.model_eos_ids):
            stopped, stop_reason = True, last
        else:
            stopped = False
    else:
        stopped = last == stop_reason
    if not stopped or st.incl:
        return ids, stop_reason
    return ids[:-1], stop_reason


def _decode(pipe: Pipeline, st: StreamState, ids: Sequence[int], final: bool) -> tuple[str, str, str]:
    """Detokenize; returns (text exempt from stop strings (first ``min_tokens``), text to check,
    U+FFFD for a character the final flush dropped incomplete (kept only where the parser says,
    ``Parser.keeps_partial``))."""
    drop = pipe.drop_ids(st.skip, st.parser is not None)
    table = pipe.detok.token_bytes
    if table is not None and not final and st.ntok == st.min_tok:
        # the streaming step of a byte-level tokenizer past min_tokens (nearly every chunk): the
        # byte table's step over the state's held bytes alone (its window fields stay unused)
        held = bytes(st.pend)
        text, pending = detokenize.byte_step(table, held, ids, drop)
        if pending != held:
            st.pend = list(pending)
        return "", text, ""
    state = before = DetokState(pending=bytes(st.pend), window=tuple(st.win), prefix=st.pre, read=st.rd)
    n_head = max(0, min(len(ids), st.min_tok - st.ntok))
    head = ""
    if n_head:  # inside min_tokens (rare): that part is exempt from stop strings
        head, state = detokenize.step(pipe.detok, state, ids[:n_head], drop)
    tail, state = detokenize.step(pipe.detok, state, ids[n_head:] if n_head else ids, drop)
    if st.ntok != st.min_tok:  # (state fields are written only when they change: a write costs)
        st.ntok = min(st.min_tok, st.ntok + len(ids))
    partial = ""
    if final:
        rest, partial, state = detokenize.finish(pipe.detok, state)
        if pipe.parser is None:  # only a parser may keep it (``Parser.keeps_partial``)
            partial = ""
        if st.ntok < st.min_tok:
            head += rest
        else:
            tail += rest
    if state is not before:  # step and flush return their input state when nothing changed
        st.pend, st.win, st.pre, st.rd = list(state.pending), list(state.window), state.prefix, state.read
    return head, tail, partial


def _parse(
    pipe: Pipeline,
    st: StreamState,
    out: StepOutput,
    text: str,
    ids: Sequence[int],
    end: bool,
    choice_index: int,
    partial: str = "",
) -> None:
    if pipe.parser is None:
        out.content = text
        return
    deltas: list[Any] = []
    # advance gives every step its own parser state (a copy, or a state its caller owns), which
    # the parser then advances in place (so the field keeps the same dict)
    if text or ids:
        _, deltas = pipe.parser.feed(st.parser, text, ids, in_place=True)
    if end and partial and pipe.parser.keeps_partial(st.parser):
        _, more = pipe.parser.feed(st.parser, partial, (), in_place=True)
        deltas = [*deltas, *more]
    if end:
        _, more = pipe.parser.finish(st.parser, in_place=True)
        deltas = [*deltas, *more]
    out.content = "".join(d.content for d in deltas if d.content)
    out.reasoning = "".join(d.reasoning for d in deltas if d.reasoning)
    out.empty_reasoning = not out.reasoning and any(d.reasoning == "" for d in deltas)
    out.tool_calls = _tool_calls(st, [tc for d in deltas for tc in d.tool_calls], choice_index)


def _tool_calls(st: StreamState, pieces: Sequence[Any], choice_index: int) -> list[dict[str, Any]]:
    """Merge one step's tool-call pieces per index (first-seen order) and assign ids."""
    merged: dict[int, dict[str, Any]] = {}
    for tc in pieces:
        call = merged.get(tc.index)
        if call is None:
            call = {
                "id": None,
                "type": None,
                "index": tc.index,
                "function": {"name": None, "arguments": None},
            }
            merged[tc.index] = call
        if tc.name is not None:
            call["id"] = tc.id or tool_call_id(st.rid, choice_index, tc.index)
            call["type"] = "function"
            call["function"]["name"] = tc.name
            st.calls += 1
        if tc.arguments:
            fn = call["function"]
            fn["arguments"] = (fn["arguments"] or "") + tc.arguments
    if merged:
        st.tools = True
    return list(merged.values())


def advance(
    pipe: Pipeline,
    state: StreamState,
    ids: Sequence[int],
    *,
    final: bool,
    finish_reason: str | None = None,
    stop_reason: int | str | None = None,
    logprob_content: Sequence[Any] | None = None,
    choice_index: int = 0,
    in_place: bool = False,
) -> tuple[StepOutput, StreamState]:
    """One pipeline step for one choice. ``final``: this is the last step (flush everything).

    After a stop string matched (``stop_generation``), the state is ``done`` and later steps
    produce nothing. Returns the step's output and the next state (the input is not mutated,
    unless ``in_place``: then the next state *is* ``state``, advanced, which saves a deep copy
    per step for an owner that never looks back, e.g. the gateway's in-memory stream).
    """
    if in_place:
        st = state
    else:  # the parser updates its state dict in place: give this step its own copy
        fresh = None if state.parser is None else orjson.loads(orjson.dumps(state.parser))
        st = state.model_copy(update={"parser": fresh})
    out = StepOutput()
    if st.done:
        return out, st
    if logprob_content and not st.hide:
        limit = None if st.lp_k < 0 else st.lp_k
        out.logprobs, ctx = logprobs.to_chat(pipe.detok, logprob_content, limit, st.lp_ctx)
        st.lp_ctx = list(ctx)
    text_ids, out.stop_reason = (
        drop_stop_token(pipe, st, ids, finish_reason, stop_reason) if final else (ids, None)
    )
    head, tail, partial = _decode(pipe, st, text_ids, final)
    emit, held, match = stop_strings.step(st.held, tail, st.stops, st.incl)
    if held != st.held:
        st.held = held
    text = head + emit
    if match is not None:
        text += match.text
        out.stop_reason, out.stop_generation = match.stop, True
        finish_reason, final = "stop", True
    elif final:
        text += stop_strings.flush(st.held)
        st.held = ""
    # Parsers match markers in the text; ids would run past a stop-string cut, so none then.
    _parse(pipe, st, out, text, () if st.stops else text_ids, final, choice_index,
           "" if match is not None else partial)
    if final:
        st.done = True
        # a stop string cut the output: a call it cut is unfinished, so never "tool_calls"
        # (vLLM 0.33 cuts before parsing and answers "stop"; README "Deliberate differences")
        cut = isinstance(out.stop_reason, str)
        tool_finish = st.tools and finish_reason in ("stop", None) and not st.named and not cut
        out.finish_reason = "tool_calls" if tool_finish else (finish_reason or "stop")
    return out, st
