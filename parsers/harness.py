"""Drive a parser over chunks the way a streaming derender does; shared by tests and
``python -m parsers.conformance``.

``run_stream`` feeds each chunk, optionally passing the state through
``orjson.dumps``/``orjson.loads`` between chunks (what a client-carried ``stream_state``
does), and returns every delta plus their join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from .parser import Parser, join_deltas
from .types import Delta, ParseContext, ParseResult


def run_stream(
    parser: Parser,
    ctx: ParseContext,
    chunks: Iterable[str],
    *,
    prompt_token_ids: Sequence[int] | None = None,
    roundtrip: bool = False,
) -> tuple[list[Delta], ParseResult, list[dict[str, Any]]]:
    """Feed ``chunks`` then finish. Returns (deltas, joined result, state after each chunk)."""
    state = parser.start(ctx, prompt_token_ids)
    deltas: list[Delta] = []
    states: list[dict[str, Any]] = []
    for chunk in chunks:
        if roundtrip:
            state = orjson.loads(orjson.dumps(state))
        state, out = parser.feed(state, chunk)
        deltas += out
        states.append(state)
    if roundtrip:
        state = orjson.loads(orjson.dumps(state))
    state, out = parser.finish(state)
    deltas += out
    return deltas, join_deltas(deltas), states


def call_delta_problems(deltas: Sequence[Delta]) -> list[str]:
    """Streaming rules a client relies on: each call's first piece carries its complete name,
    the name is sent exactly once, and indices start at 0 and grow by one."""
    problems: list[str] = []
    named: list[int] = []
    for d in deltas:
        for c in d.tool_calls:
            if c.name is not None:
                if c.index in named:
                    problems.append(f"name of call {c.index} sent twice")
                if c.index != len(named):
                    problems.append(f"call index {c.index} out of order")
                named.append(c.index)
            elif c.index not in named:
                problems.append(f"arguments of call {c.index} before its name")
    return problems
