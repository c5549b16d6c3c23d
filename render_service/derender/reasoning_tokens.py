"""Reasoning-token count of an output: ``usage.output_tokens_details.reasoning_tokens`` of the
Responses derender, as vLLM 0.33's Responses serving reports it.

vLLM counts on the output token ids, per reasoning parser (``count_reasoning_tokens``; for
gpt-oss ``HarmonyParser.process_chunk(...).reasoning_token_count``). Each rule here is a pure
step over the ids of one chunk with a small flat state (a list of ints, plus for harmony the ids
of the open message header), so a stream counts chunk by chunk and equals the batch count at
any chunking (batch is one step over every id).

Rules (``Counting.kind``), measured against vLLM's classes by
``tools/record_reasoning_token_goldens.py`` (``tests/data/reasoning_token_goldens.json``):

* ``flag`` (vLLM's parser engine: qwen3, mimo, nemotron_v3, kimi_k2, minimax_m2, step3p5,
  granite_thinking_parser, deepseek_v4, glm45, glm47, ling3): tokens inside
  reasoning, markers and special tokens not counted; reasoning is open at the start unless the
  prompt closed it (the parser's own start state); ``<think>`` inside reasoning is dropped;
  after ``</think>`` a ``<think>`` is content, except for the formats that reopen (``REOPEN``);
  glm45 / glm47 / ling3 count nothing with ``enable_thinking: false``.
* ``depth`` (``BaseThinkingReasoningParser``: deepseek_r1, step5, ernie45, hy_v3; deepseek_v3 /
  holo2 / poolside_v1 with ``thinking``): a depth counter over the start/end ids starting at 0,
  so a prompt-opened ``<think>`` (R1's template) counts nothing, as vLLM.
* ``until_end`` (step3): every token before the first end id (all of them without one).
* ``hy_v4``: like ``until_end`` but a leading start token is skipped; 0 with
  ``reasoning_effort: "no_think"``.
* ``harmony`` (openai_gptoss): the non-special tokens of ``analysis`` messages and of
  ``commentary`` messages with a recipient (the channel and recipient read from the header,
  ``<|start|>``/``<|channel|>`` … ``<|message|>``).
* ``none``: every other parser name (vLLM's base ``count_reasoning_tokens`` is 0), and the
  names whose vLLM rule is not mirrored yet (see README).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

Kind = Literal["none", "flag", "depth", "until_end", "hy_v4", "harmony"]

#: vLLM 0.33 reasoning parser name → rule and its (start, end) marker texts.
RULES: dict[str, tuple[Kind, str, str]] = {
    "qwen3": ("flag", "<think>", "</think>"),
    "mimo": ("flag", "<think>", "</think>"),
    "nemotron_v3": ("flag", "<think>", "</think>"),
    "kimi_k2": ("flag", "<think>", "</think>"),
    "minimax_m2": ("flag", "<think>", "</think>"),
    "step3p5": ("flag", "<think>", "</think>"),
    "granite_thinking_parser": ("flag", "<think>", "</think>"),
    "deepseek_v4": ("flag", "<think>", "</think>"),
    "glm45": ("flag", "<think>", "</think>"),
    "glm47": ("flag", "<think>", "</think>"),
    "ling3": ("flag", "<think>", "</think>"),
    "deepseek_r1": ("depth", "<think>", "</think>"),
    "step5": ("depth", "<think>", "</think>"),
    "ernie45": ("depth", "<think>", "</think>"),
    "hy_v3": ("depth", "<think>", "</think>"),
    "deepseek_v3": ("depth", "<think>", "</think>"),
    "holo2": ("depth", "<think>", "</think>"),
    "poolside_v1": ("depth", "<think>", "</think>"),
    "step3": ("until_end", "<think>", "</think>"),
    "hy_v4": ("hy_v4", "<think>", "</think>"),
    "openai_gptoss": ("harmony", "", ""),
}
ALIASES = {
    "deepseek-r1": "deepseek_r1",
    "deepseek-v3": "deepseek_v3",
    "gpt-oss": "openai_gptoss",
    "gpt_oss": "openai_gptoss",
    "qwen3-thinking": "qwen3",
}
#: deepseek_v3-style parsers count only with thinking on (vLLM: else its identity parser, 0).
NEEDS_THINKING = frozenset({"deepseek_v3", "holo2", "poolside_v1"})
#: Parser-engine formats where ``<think>`` in content opens reasoning again.
REOPEN = frozenset({"deepseek_v4", "glm45", "glm47", "ling3"})
#: Parser-engine formats that count nothing with ``enable_thinking: false`` (vLLM: identity mode).
OFF_WHEN_DISABLED = frozenset({"glm45", "glm47", "ling3"})
HARMONY_MARKS = (
    "<|start|>",
    "<|channel|>",
    "<|message|>",
    "<|end|>",
    "<|call|>",
    "<|return|>",
    "<|constrain|>",
)
#: Bound on the kept header of an open harmony message (a header is a few tokens).
MAX_HEADER = 64
_RECIPIENT = re.compile(r"\bto=([^\s<]+)")


@dataclass(frozen=True, slots=True)
class Counting:
    """One model's counting rule: ``kind``, the marker ids, the ids never counted (special
    tokens) and, for harmony, the header decoder."""

    kind: Kind = "none"
    reopen: bool = False
    start: int = -1
    end: int = -1
    special: frozenset[int] = frozenset()
    marks: Mapping[str, int] | None = None
    decode: Callable[[list[int]], str] | None = None


NONE = Counting()


def counting_for(
    reasoning_parser: str | None,
    vocab: Mapping[str, int],
    special_ids: frozenset[int],
    decode: Callable[[list[int]], str],
) -> Counting:
    """The rule of a configured reasoning parser over a vocabulary (token text → id);
    :data:`NONE` for a parser vLLM does not count with, or whose markers the vocabulary lacks
    (vLLM's parser would refuse to start there)."""
    name = ALIASES.get(reasoning_parser or "", reasoning_parser or "")
    kind, start, end = RULES.get(name, ("none", "", ""))
    if kind == "none":
        return NONE
    if kind == "harmony":
        marks = {m: vocab[m] for m in HARMONY_MARKS if m in vocab}
        if "<|message|>" not in marks:
            return NONE
        return Counting(kind, special=special_ids | frozenset(marks.values()), marks=marks, decode=decode)
    if start not in vocab or end not in vocab:
        return NONE
    return Counting(kind, name in REOPEN, vocab[start], vocab[end], special_ids)


def initial(
    counting: Counting, reasoning_parser: str | None, kwargs: Mapping[str, Any] | None, reasoning_open: bool
) -> list[int]:
    """The state at the start of an output: ``[open/depth, count]`` (``flag``/``depth``),
    ``[seen, ended, count]`` (``until_end``/``hy_v4``), ``[phase, reasoning, count]``
    (harmony); ``[]`` when nothing is counted for this request (``none``, thinking off).
    ``reasoning_open``: the parser's start state has reasoning open (``flag``: the prompt did not
    close it)."""
    kwargs = kwargs or {}
    name = ALIASES.get(reasoning_parser or "", reasoning_parser or "")
    if counting.kind == "none":
        return []
    if name in NEEDS_THINKING and not (kwargs.get("thinking") or kwargs.get("enable_thinking")):
        return []
    if counting.kind == "hy_v4" and kwargs.get("reasoning_effort") == "no_think":
        return []
    if name in OFF_WHEN_DISABLED and kwargs.get("enable_thinking") is False:
        return []
    if counting.kind == "flag":
        return [1 if reasoning_open else 0, 0]
    return [0, 0, 0] if counting.kind in ("until_end", "hy_v4", "harmony") else [0, 0]


def count(state: Sequence[int]) -> int:
    """The reasoning tokens counted so far (0 for an empty state)."""
    return int(state[-1]) if state else 0


def step(
    counting: Counting, state: list[int], header: list[int], ids: Sequence[int]
) -> tuple[list[int], list[int]]:
    """Advance over the ids of one chunk: ``(state, header)`` → the new pair (new lists).
    ``header`` is the harmony header ids so far (``[]`` for the other rules)."""
    if not state:
        return state, header
    kind = counting.kind
    if kind == "harmony":
        return _harmony(counting, list(state), list(header), ids)
    a, *rest = state
    n = rest[-1]
    start, end, special = counting.start, counting.end, counting.special
    if kind == "flag":
        for i in ids:
            if i == end:
                a = 0
            elif i == start:
                a = a or int(counting.reopen)
            elif a and i not in special:
                n += 1
        return [a, n], header
    if kind == "depth":
        for i in ids:
            if i == start:
                a += 1
            elif i == end:
                a = max(a - 1, 0)
            elif a:
                n += 1
        return [a, n], header
    ended = rest[0]
    for i in ids:  # until_end / hy_v4: a = tokens seen (capped at 1), ended: first end id seen
        first = not a
        a = 1
        if ended:
            continue
        if i == end:
            ended = 1
        elif not (kind == "hy_v4" and first and i == start):
            n += 1
    return [a, ended, n], header


def _harmony(
    counting: Counting, state: list[int], header: list[int], ids: Sequence[int]
) -> tuple[list[int], list[int]]:
    """phase 0: in a header (ids kept), 1: in a message's content; reasoning: the content counts."""
    marks = counting.marks or {}
    message, start = marks.get("<|message|>"), marks.get("<|start|>")
    ends = {marks.get(m) for m in ("<|end|>", "<|call|>", "<|return|>")}
    phase, reasoning, n = state
    for i in ids:
        if phase == 0:
            if i == message:
                reasoning = int(_reasoning_header(counting, header))
                phase, header = 1, []
            elif i == start:
                header = []
            elif len(header) < MAX_HEADER:
                header.append(i)
        elif i in ends:
            phase, reasoning = 0, 0
        elif reasoning and i not in counting.special:
            n += 1
    return [phase, reasoning, n], header


def _reasoning_header(counting: Counting, header: list[int]) -> bool:
    """A header (``assistant to=R<|channel|>C ...``) opens a counted message: channel
    ``analysis``, or ``commentary`` with a recipient (vLLM ``HarmonyParser._is_reasoning_token``)."""
    assert counting.decode is not None
    text = counting.decode(header)
    _, sep, after = text.partition("<|channel|>")
    if not sep:
        return False
    channel = re.split(r"[\s<]", after.strip(), maxsplit=1)[0]
    if channel == "analysis":
        return True
    return channel == "commentary" and _RECIPIENT.search(text.split("<|constrain|>")[0]) is not None
