"""Which formats stream tool-call arguments as they arrive and which send each call's arguments
in one piece, as vLLM 0.33 does: the recorded cases of ``cases/vllm033_measured.jsonl`` with a
``vllm_stream`` entry (made by ``tools/record_parser_cases_with_vllm.py``) keep vLLM's token
texts and how many argument fragments each call streamed in at one token per chunk. We feed
the same chunks: where vLLM sent a call's arguments in several fragments ours does too, and where
vLLM sent every call's arguments in one piece so do we."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import parsers
from parsers.cases import load
from parsers.types import ParseContext

CASES = Path(__file__).parent / "cases" / "vllm033_measured.jsonl"
LINES = CASES.read_text(encoding="utf-8").splitlines()
RAW = {r["id"]: r for r in map(json.loads, LINES) if "vllm_stream" in r}
SHAPED = [c for c in load(CASES) if c.id in RAW]


def _fragments(case) -> tuple[list[int], parsers.ParseResult, parsers.ParseResult]:
    p, ctx = parsers.get_parser(case.reasoning, case.tool), ParseContext(**case.ctx)
    state, deltas = p.start(ctx, None), []
    for chunk in RAW[case.id]["vllm_stream"]["chunks"]:
        state, d = p.feed(state, chunk)
        deltas += d
    state, d = p.finish(state)
    deltas += d
    counts: dict[int, int] = {}
    for delta in deltas:
        for call in delta.tool_calls:
            if call.arguments:
                counts[call.index] = counts.get(call.index, 0) + 1
    text = "".join(RAW[case.id]["vllm_stream"]["chunks"])
    return [counts[i] for i in sorted(counts)], parsers.join_deltas(deltas), p.parse(ctx, None, text)


def test_every_listed_format_has_a_shape_case():
    names = {c.tool for c in SHAPED}
    listed = {"gemma4", "functiongemma", "apertus", "cohere_command3", "plamo3", "kimi_k3", "minimax_m3"}
    assert names >= listed


@pytest.mark.parametrize("case", SHAPED, ids=[c.id for c in SHAPED])
def test_arguments_stream_where_vllm_streams_them(case):
    vllm = RAW[case.id]["vllm_stream"]["argument_fragments"]
    ours, stream, batch = _fragments(case)
    assert stream == batch
    assert len(ours) == len(vllm)
    if all(n == 1 for n in vllm):
        assert ours == vllm, "vLLM sends each call's arguments in one piece"
    for n_vllm, n_ours in zip(vllm, ours, strict=True):
        if n_vllm > 1:
            assert n_ours > 1, "vLLM streams this call's arguments; ours came in one piece"


Q = '<|"|>'
GEMMA_TEXTS = [
    f"a<|tool_call>call:f{{days:3,city:{Q}Paris{Q},ok:true}}<tool_call|>",
    f"<|tool_call>call:f{{tags:[{Q}x{Q},{Q}y z{Q}],o:{{k:{Q}v{Q},n:1.5}}}}<tool_call|>",
    f"<|tool_call>call:f{{city:{Q}Pa\"r\\is{Q}}}<tool_call|>",
    f"<|tool_call>call:f{{a:{Q}}}{Q}}} junk<tool_call|>x",
    f"<|tool_call>call:f{{o:{{k:{Q}}}{Q}",
    f"<|tool_call>call:f{{a:<b,c:{Q[:3]}",
]


@pytest.mark.parametrize("text", GEMMA_TEXTS)
def test_gemma4_streamed_arguments_equal_batch_at_every_two_chunk_split(text):
    """Gemma 4's compact arguments converted as they stream: every split point (inside a
    quote token, a key, a bare or nested value) joins to the batch, which is valid JSON."""
    ctx = ParseContext(tools=({"type": "function", "function": {"name": "f", "parameters": {}}},))
    p = parsers.get_parser(None, "gemma4")
    batch = p.parse(ctx, None, text)
    assert batch.tool_calls and all(isinstance(json.loads(c.arguments), dict) for c in batch.tool_calls)
    for i in range(len(text) + 1):
        state = p.start(ctx, None)
        state, d1 = p.feed(state, text[:i])
        state, d2 = p.feed(state, text[i:])
        state, d3 = p.finish(state)
        assert parsers.join_deltas(d1 + d2 + d3) == batch, i
