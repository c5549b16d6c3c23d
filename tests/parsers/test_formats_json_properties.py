"""Hypothesis laws for the JSON tool-call families (fmt2) and unit tests of the engine
extensions they added (hold_trailing, keep-into-body, markers that prefix longer markers).

Laws: for any output built from the families' markers, JSON calls and bracket-laden prose,
and any chunking with JSON state round trips, the joined stream equals the batch result,
client rules hold, and the state stays small when no call is open."""

from __future__ import annotations

import functools
import json

import orjson
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import parsers
from parsers import machine
from parsers.harness import call_delta_problems, run_stream
from parsers.jsoncalls import JsonCalls
from parsers.spec import BODY, CONTENT, DROP, FormatSpec, Transition
from parsers.types import ParseContext

NAMES = [
    "llama3_json",
    "llama4_json",
    "mistral",
    "granite",
    "granite4",
    "granite-20b-fc",
    "internlm",
    "jamba",
    "xlam",
    "phi4_mini_json",
    "longcat",
    "hunyuan_a13b",
    "ernie45",
    "gigachat3",
]
TOOLS = ({"type": "function", "function": {"name": "f"}},)
MARKERS = [
    "<|python_tag|>",
    "<|python_start|>",
    "<|python_end|>",
    "; ",
    "[TOOL_CALLS]",
    "[ARGS]",
    "<|tool_call|>",
    "<tool_call>",
    "</tool_call>",
    "<function_call> ",
    "<|action_start|><|plugin|>",
    "<|action_end|>",
    "<tool_calls>",
    "</tool_calls>",
    "```json\n",
    "\n```",
    "functools",
    "<longcat_tool_call>",
    "</longcat_tool_call>",
    "<think>",
    "</think>",
    "助手：",
    "<|message_sep|>\n\nfunction call<|role_sep|>\n",
    "<|function_call|>",
    "</s>",
    "[",
    "{",
]

args = st.dictionaries(
    st.text(alphabet="ab_é", min_size=1, max_size=3),
    st.one_of(st.integers(-99, 99), st.booleans(), st.none(), st.text(alphabet='a "\\}{][é\n', max_size=5)),
    max_size=3,
)


@st.composite
def call_json(draw) -> str:
    obj = {
        "name": draw(st.sampled_from(["f", "get_w", "é"])),
        draw(st.sampled_from(["arguments", "parameters"])): draw(args),
    }
    if draw(st.booleans()):
        obj = dict(reversed(list(obj.items())))
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()))
    return f"[{text}]" if draw(st.booleans()) else text


piece = st.one_of(
    st.text(alphabet='ab <>/{}[]"\\\n é', max_size=6),
    st.sampled_from(MARKERS),
    call_json(),
    st.sampled_from(['f{"a": 1}', 'f[ARGS]{"b": [2]}', '{"name": "f"}', "[]", "[1]"]),
)
outputs = st.lists(piece, max_size=7).map("".join)


@st.composite
def split(draw, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=8)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


CHOICES = ["auto", "auto", "required", "none", {"type": "function", "function": {"name": "f"}}]


@settings(max_examples=examples(200), deadline=None)
@given(name=st.sampled_from(NAMES), text=outputs, choice=st.sampled_from(CHOICES), data=st.data())
def test_stream_equals_batch_for_any_chunking(name, text, choice, data):
    """Joined deltas of any chunking (state through JSON between chunks) equal the batch
    result under every tool_choice; names are sent once, complete, first."""
    parser = parsers.get_parser(None, name)
    ctx = ParseContext(tools=TOOLS, tool_choice=choice)
    batch = parser.parse(ctx, None, text)
    deltas, joined, _ = run_stream(parser, ctx, data.draw(split(text)), roundtrip=True)
    assert joined == batch
    assert call_delta_problems(deltas) == []
    for call in batch.tool_calls:
        assert call.name is not None and call.arguments is not None


@settings(max_examples=examples(60), deadline=None)
@given(name=st.sampled_from(NAMES), prose=st.text(alphabet="ab <>/\n é.", min_size=1, max_size=20))
def test_state_stays_flat_over_plain_text(name, prose):
    """Feeding 50 chunks of plain prose keeps the serialised state under a fixed size (at most
    MAX_TRAILING withheld whitespace characters)."""
    parser = parsers.get_parser(None, name)
    state = parser.start(ParseContext(tools=TOOLS), None)
    sizes = []
    for _ in range(50):
        state, _ = parser.feed(state, prose)
        sizes.append(len(orjson.dumps(state)))
    assert max(sizes) <= 400 + 2 * machine.MAX_TRAILING + 3 * len(prose.encode())


# -- engine extensions -------------------------------------------------------------------------

SPEC = FormatSpec(
    name="mini_json",
    kind="tool",
    markers={"OPEN": "[", "START": "[CALL]"},
    modes={"C": CONTENT, "B": BODY, "A": DROP},
    transitions={("C", "OPEN"): Transition("B", keep=True), ("C", "START"): Transition("B")},
    initial_mode="C",
    body=JsonCalls(),
    body_end_mode="A",
    reject_mode="C",
    body_options={"array": True},
    hold_trailing={"C": " \n"},
)


def run(chunks: list[str]) -> list:
    state = machine.start(SPEC)
    events = [e for c in chunks for e in machine.feed(SPEC, state, c)]
    return events + machine.finish(SPEC, state)


def content(events: list) -> str:
    return "".join(e[1] for e in events if e[0] == "content")


def test_hold_trailing_dropped_before_a_committed_call():
    """Trailing whitespace of content is withheld and dropped when a call follows."""
    events = run(["Hi \n", '[{"name": "f", "arguments": {}}]'])
    assert content(events) == "Hi" and ("name", 0, "f") in events


def test_hold_trailing_released_on_rejection_and_at_finish():
    """Withheld whitespace comes back when the body is not a call, and at end of stream."""
    assert content(run(["a \n", "[1] b "])) == "a \n[1] b "


def test_keep_transition_feeds_the_marker_to_the_body():
    """A keep transition into a body makes the marker the body's first text (`[` opens the array)."""
    events = run(['[{"name": "f", "arguments": {"x": 1}}]'])
    assert [e for e in events if e[0] != "content"] == [("name", 0, "f"), ("args", 0, '{"x": 1}')]


def test_marker_that_prefixes_a_longer_marker_waits_for_more_text():
    """`[` at a chunk end may still become `[CALL]`: it is held, so chunking cannot change the result."""
    whole = run(['[CALL][{"name": "f", "arguments": {}}]'])
    pieces = run(["[", "CALL]", '[{"name": "f", "arguments": {}}]'])
    assert whole == pieces and content(whole) == ""


def test_long_whitespace_run_is_withheld_only_up_to_a_bound():
    """Only the last MAX_TRAILING characters of a whitespace run are withheld (flat state);
    the result does not depend on the chunking."""
    text = "a" + "\n" * (machine.MAX_TRAILING + 10) + '[CALL][{"name": "f", "arguments": {}}]'
    whole = run([text])
    assert content(whole) == "a" + "\n" * 10
    pieces = run(list(text))
    assert content(pieces) == content(whole)
    assert [e for e in pieces if e[0] != "content"] == [e for e in whole if e[0] != "content"]


@settings(max_examples=examples(100), deadline=None)
@given(name=st.sampled_from(NAMES), text=outputs, data=st.data())
def test_feed_is_pure(name, text, data):
    """Feeding the same state twice gives the same result (a retried chunk): feed never
    mutates the state it was given, including nested body states."""
    parser = parsers.get_parser(None, name)
    state = parser.start(ParseContext(tools=TOOLS, tool_choice=data.draw(st.sampled_from(CHOICES))), None)
    for chunk in data.draw(split(text)):
        before = orjson.dumps(state)
        first = parser.feed(state, chunk)
        assert orjson.dumps(state) == before
        assert parser.feed(state, chunk) == first
        state = first[0]
    assert parser.finish(state) == parser.finish(state)


@functools.cache
def _case_texts() -> list[tuple[str, str, dict]]:
    """(tool parser, model output, ParseContext kwargs) of the shared cases of these families."""
    from conftest import shared_path

    from parsers.cases import load

    cases = load(shared_path("cases", "parser_cases.jsonl")) + load(shared_path("cases", "bug_cases.jsonl"))
    return [(c.tool, c.text, c.ctx) for c in cases if c.tool in NAMES]


@settings(max_examples=examples(60), deadline=None)
@given(data=st.data())
def test_case_outputs_stream_equals_batch_for_any_chunking(data):
    """Every conformance-case output of these families (batch-only cases too), split at random
    with state round trips, streams to exactly its batch result."""
    name, text, ctx_args = data.draw(st.sampled_from(_case_texts()))
    parser = parsers.get_parser(None, name)
    ctx = ParseContext(**ctx_args)
    deltas, joined, _ = run_stream(parser, ctx, data.draw(split(text)), roundtrip=True)
    assert joined == parser.parse(ctx, None, text)
    assert call_delta_problems(deltas) == []
