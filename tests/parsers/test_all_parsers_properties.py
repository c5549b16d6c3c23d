"""Generic laws for EVERY registered parser name (``parsers.REASONING_PARSERS`` and
``parsers.TOOL_PARSERS``, read at import so names added later are covered automatically).

Material per name: the model outputs of its conformance cases (``parser_cases.jsonl`` and the
parser cases of ``bug_cases.jsonl``) with each case's request context (tools, tool_choice,
chat_template_kwargs) and composition (a tool case may name a reasoning parser too); a small
generic output when a name has no case. Hypothesis draws whole outputs and random
concatenations of slices of them, splits them at random points, and round-trips the state
through orjson between chunks. Laws:

* the joined stream deltas equal ``Parser.parse`` (content, reasoning, tool names, arguments, ids)
  and ``reasoning_ended`` after the last chunk equals its value after one whole-text feed;
* tool-call deltas follow the client rules (complete name exactly once, first; indices in order)
  and the names sent are the final names (nothing is retracted or renamed later);
* the state JSON stays flat while plain text streams (reasoning or content, no call open).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest
from conftest import examples
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import parsers
from parsers.cases import SHARED, load, model_folder, tokenizer, tokenizer_vocab
from parsers.formats.response_template import EXAMPLE_CONFIG
from parsers.harness import call_delta_problems, run_stream
from parsers.types import ParseContext

CASE_FILES = (
    SHARED / "cases" / "parser_cases.jsonl",
    SHARED / "cases" / "bug_cases.jsonl",
    Path(__file__).parent / "cases" / "vllm033_new_formats.jsonl",
    Path(__file__).parent / "cases" / "vllm033_measured.jsonl",
)
GENERIC_TOOLS = ({"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},)
GENERIC_OUTPUTS = (
    "<think>some reasoning</think>the answer",
    'text <tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>',
    "plain content only",
)
PLAIN = "lorem ipsum é数 dolor\n"
NAMES = [("reasoning", n) for n in parsers.REASONING_PARSERS] + [("tool", n) for n in parsers.TOOL_PARSERS]


@dataclass(frozen=True)
class Material:
    """One way to run a name: the parser pair, request context, prompt ids and an output."""

    reasoning: str | None
    tool: str | None
    ctx: dict[str, Any]
    prompt: str | None
    model: str
    text: str


def _all_cases() -> list[Any]:
    return [c for path in CASE_FILES if path.exists() for c in load(path)]


CASES = _all_cases()


def _implemented(reasoning: str | None, tool: str | None) -> bool:
    return (reasoning is None or reasoning in parsers.REASONING_PARSERS) and (
        tool is None or tool in parsers.TOOL_PARSERS
    )


def materials(kind: str, name: str) -> list[Material]:
    """Case outputs of ``name`` (as reasoning or tool parser), else generic outputs."""
    found = [
        Material(c.reasoning, c.tool, dict(c.ctx), c.prompt, c.model, c.text)
        for c in CASES
        if (c.reasoning if kind == "reasoning" else c.tool) == name and _implemented(c.reasoning, c.tool)
    ]
    if found:
        return found
    pair = (name, None) if kind == "reasoning" else (None, name)
    ctx = {"tools": GENERIC_TOOLS} if kind == "tool" else {}
    return [Material(*pair, ctx, None, "", text) for text in GENERIC_OUTPUTS]


def _vocab_and_prompt(m: Material) -> tuple[Mapping[str, int] | None, list[int] | None]:
    folder = model_folder(m.model)
    if folder is None:
        return None, None
    tok = tokenizer(folder)
    prompt = tok.encode(m.prompt, add_special_tokens=False) if m.prompt else None
    return tokenizer_vocab(folder), prompt


def _context(m: Material) -> ParseContext:
    ctx = dict(m.ctx)
    if ctx.get("tools") is not None:
        ctx["tools"] = tuple(ctx["tools"])
    return ParseContext(**ctx)


@st.composite
def output_for(draw, pool: list[Material]) -> tuple[Material, str]:
    """A case output, or a concatenation of random slices of the pool's outputs (the context
    is the first drawn case's, so tool parsers get that case's tools)."""
    base = draw(st.sampled_from(pool))
    if draw(st.booleans()):
        return base, base.text
    pieces = []
    for _ in range(draw(st.integers(1, 4))):
        text = draw(st.sampled_from(pool)).text
        a = draw(st.integers(0, len(text)))
        b = draw(st.integers(a, len(text)))
        pieces.append(text[a:b])
    if draw(st.booleans()):
        pieces.insert(draw(st.integers(0, len(pieces))), PLAIN)
    return base, "".join(pieces)


@st.composite
def split(draw, text: str) -> list[str]:
    """Random chunks whose concatenation is ``text`` (empty chunks allowed)."""
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=16)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


def _sent_names(deltas: list[Any]) -> dict[int, str]:
    return {c.index: c.name for d in deltas for c in d.tool_calls if c.name is not None}


@pytest.mark.parametrize(("kind", "name"), NAMES)
@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_stream_equals_batch_for_any_split(kind, name, data):
    """For this parser name: joined deltas of a randomly chunked stream (state JSON round-tripped
    between chunks) equal the batch parse; tool-call deltas follow the client rules and the
    names sent are the final names; reasoning_ended agrees with a one-shot feed."""
    m, text = data.draw(output_for(materials(kind, name)))
    vocab, prompt = _vocab_and_prompt(m)
    parser = parsers.get_parser(m.reasoning, m.tool, vocab=vocab, tokenizer_config=EXAMPLE_CONFIG)
    ctx = _context(m)
    batch = parser.parse(ctx, prompt, text)
    chunks = data.draw(split(text))
    deltas, streamed, states = run_stream(parser, ctx, chunks, prompt_token_ids=prompt, roundtrip=True)
    assert streamed == batch
    assert call_delta_problems(deltas) == []
    sent = _sent_names(deltas)
    assert [sent[i] for i in sorted(sent)] == [c.name for c in batch.tool_calls]
    assert all(orjson.loads(orjson.dumps(s)) == s for s in states)
    one_shot, _ = parser.feed(parser.start(ctx, prompt), text)
    last = states[-1] if states else parser.start(ctx, prompt)
    assert parser.reasoning_ended(orjson.loads(orjson.dumps(last))) == parser.reasoning_ended(one_shot)


def _size_after(parser: Any, ctx: ParseContext, prompt: list[int] | None, prefix: str, n: int) -> int:
    state = parser.start(ctx, prompt)
    state, _ = parser.feed(state, prefix)
    for i in range(n):
        state, _ = parser.feed(orjson.loads(orjson.dumps(state)), PLAIN[i % 5 :] + PLAIN[: i % 5])
    return len(orjson.dumps(state))


def _prefixes(m: Material, parser: Any, ctx: ParseContext, prompt: list[int] | None) -> list[str]:
    """The empty prefix, plus (reasoning-only runs) the case output when it leaves reasoning
    ended, so the plain run is measured in content as well as in reasoning."""
    out = [""]
    if m.tool is None:
        state, _ = parser.feed(parser.start(ctx, prompt), m.text)
        if parser.reasoning_ended(state):
            out.append(m.text)
    return out


@pytest.mark.parametrize(("kind", "name"), NAMES)
def test_state_stays_flat_over_plain_text(kind, name):
    """For this parser name and each distinct case context: the state JSON after 400 chunks of
    plain text is no larger than after 20 chunks (plus a few bytes), both from a fresh start
    and, for reasoning-only runs, after an output that ended reasoning."""
    seen: set[bytes] = set()
    for m in materials(kind, name):
        key = orjson.dumps([m.reasoning, m.tool, m.ctx, m.prompt], option=orjson.OPT_SORT_KEYS, default=str)
        if key in seen or len(seen) >= 4:
            continue
        seen.add(key)
        vocab, prompt = _vocab_and_prompt(m)
        parser = parsers.get_parser(m.reasoning, m.tool, vocab=vocab, tokenizer_config=EXAMPLE_CONFIG)
        ctx = _context(m)
        for prefix in _prefixes(m, parser, ctx, prompt):
            short = _size_after(parser, ctx, prompt, prefix, 20)
            long = _size_after(parser, ctx, prompt, prefix, 400)
            assert long <= short + 16, (m.reasoning, m.tool, m.ctx, prefix, short, long)


def test_every_registered_name_is_parametrized():
    """The parametrization covers every registered reasoning and tool parser name."""
    assert {n for _, n in NAMES} == set(parsers.REASONING_PARSERS) | set(parsers.TOOL_PARSERS)
    assert len(NAMES) == len(parsers.REASONING_PARSERS) + len(parsers.TOOL_PARSERS)
