"""Hypothesis laws for qwen3, deepseek_r1 and hermes: chunk invariance, state round trips,
client-visible tool-call rules, and flat state size; and for vLLM's guided-JSON tool choice
(required/named) through a guided-JSON format (llama3_json)."""

from __future__ import annotations

import json

import orjson
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import parsers
from parsers.harness import call_delta_problems, run_stream
from parsers.types import ParseContext

TOOLS = ({"type": "function", "function": {"name": "f"}},)
CONFIGS = [
    ("qwen3", None, {}),
    ("qwen3", None, {"enable_thinking": False}),
    ("deepseek_r1", None, {}),
    (None, "hermes", {}),
    ("qwen3", "hermes", {}),
    ("deepseek_r1", "hermes", {}),
]

json_leaf = st.one_of(
    st.integers(-1000, 1000),
    st.booleans(),
    st.none(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(alphabet='ab "\\}{<>/é数😀\n', max_size=6),
    st.sampled_from(["</tool_call>", "<tool_call>", "</think>", 'x"}']),
)
json_args = st.dictionaries(
    st.text(alphabet="abc_é", min_size=1, max_size=4),
    st.recursive(
        json_leaf,
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text("kx", max_size=2), inner, max_size=3)
        ),
        max_leaves=6,
    ),
    max_size=3,
)


@st.composite
def tool_call(draw) -> str:
    args = draw(json_args)
    obj = {"name": draw(st.sampled_from(["f", "get_weather", "é"])), "arguments": args}
    if draw(st.booleans()):
        obj = {"arguments": args, "name": obj["name"]}
    body = json.dumps(obj, ensure_ascii=draw(st.booleans()), indent=draw(st.sampled_from([None, 1])))
    close = draw(st.sampled_from(["</tool_call>", "\n</tool_call>", ""]))
    return f"<tool_call>{draw(st.sampled_from(['', chr(10)]))}{body}{close}"


piece = st.one_of(
    st.text(alphabet='ab <>/{}"\\\n é数😀', max_size=8),
    st.sampled_from(
        [
            "<think>",
            "</think>",
            "<tool_call>",
            "</tool_call>",
            "<tool_c",
            "</thi",
            "<th",
            "</tool_",
            "\n\n",
            '{"name": "f"',
            '"arguments": {}}',
        ]
    ),
    tool_call(),
)
outputs = st.lists(piece, max_size=8).map("".join)


@st.composite
def split(draw, text: str) -> list[str]:
    cuts = sorted(draw(st.lists(st.integers(0, len(text)), max_size=12)))
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@st.composite
def case(draw):
    reasoning, tool, kwargs = draw(st.sampled_from(CONFIGS))
    text = draw(outputs)
    return reasoning, tool, kwargs, text, draw(split(text))


@settings(max_examples=examples(200), deadline=None)
@given(case())
def test_stream_equals_batch_for_any_split(c):
    """Joined stream deltas (state JSON round-tripped between chunks) equal the batch parse,
    for any output built from think blocks, text, tool calls and partial markers."""
    reasoning, tool, kwargs, text, chunks = c
    p = parsers.get_parser(reasoning, tool)
    ctx = ParseContext(tools=TOOLS, chat_template_kwargs=kwargs)
    batch = p.parse(ctx, None, text)
    deltas, streamed, _ = run_stream(p, ctx, chunks, roundtrip=True)
    assert streamed == batch
    assert call_delta_problems(deltas) == []


@settings(max_examples=examples(100), deadline=None)
@given(case())
def test_state_round_trip_changes_nothing(c):
    """Serialising the state with orjson between every chunk gives the same deltas."""
    reasoning, tool, kwargs, text, chunks = c
    p = parsers.get_parser(reasoning, tool)
    ctx = ParseContext(tools=TOOLS, chat_template_kwargs=kwargs)
    plain, _, states = run_stream(p, ctx, chunks)
    tripped, _, _ = run_stream(p, ctx, chunks, roundtrip=True)
    assert plain == tripped
    for state in states:
        assert orjson.loads(orjson.dumps(state)) == state


@settings(max_examples=examples(100), deadline=None)
@given(
    st.text(alphabet="ab <>/\n é数", max_size=30).filter(lambda t: "<tool_call>" not in t),
    st.lists(tool_call(), max_size=3),
    st.data(),
)
def test_hermes_calls_keep_their_arguments(prefix, calls, data):
    """Text before the first call is content verbatim; every call keeps its name and its
    arguments (equal after json.loads), whatever the chunking."""
    text = prefix + "".join(calls)
    p = parsers.get_parser(None, "hermes")
    ctx = ParseContext(tools=TOOLS)
    _, result, _ = run_stream(p, ctx, data.draw(split(text)))
    assert result.content == (prefix or None)
    assert len(result.tool_calls) == len(calls)
    for call, raw in zip(result.tool_calls, calls, strict=True):
        body = raw.removeprefix("<tool_call>").removesuffix("</tool_call>")
        expected = json.loads(body)
        assert call.name == expected["name"]
        assert json.loads(call.arguments) == expected["arguments"]


def _state_size(reasoning, tool, text, kwargs=None):
    p = parsers.get_parser(reasoning, tool)
    state = p.start(ParseContext(tools=TOOLS, chat_template_kwargs=kwargs or {}), None)
    for i in range(0, len(text), 7):
        state, _ = p.feed(state, text[i : i + 7])
    return len(orjson.dumps(state))


def test_state_size_is_flat():
    """State JSON after 5k chars of reasoning or content is as small as after 100 chars."""
    for reasoning, tool, prefix in [
        ("qwen3", None, ""),
        ("deepseek_r1", "hermes", ""),
        ("qwen3", "hermes", "<think>r</think>"),
        (None, "hermes", ""),
    ]:
        short = _state_size(reasoning, tool, prefix + "word é数 <thi " * 8)
        long = _state_size(reasoning, tool, prefix + "word é数 <thi " * 400)
        assert long <= short + 8, (reasoning, tool, short, long)


def test_state_size_flat_after_streamed_arguments():
    """Streamed hermes arguments are not kept in the state: a long argument string leaves it small."""
    head = '<tool_call>{"name": "f", "arguments": {"text": "'
    short = _state_size(None, "hermes", head + "x" * 100)
    long = _state_size(None, "hermes", head + "x" * 5000)
    assert long == short


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["a", "b_c", "é"]), json_args), min_size=1, max_size=3),
    st.sampled_from([None, 2]),
    st.data(),
)
def test_guided_required_array_any_split(calls, indent, data):
    """tool_choice=required: the guided JSON array gives each call's name and parameters, and
    any chunking streams the same result as the batch parse (a guided-JSON format, xlam:
    hermes, llama3_json and qwen3_coder are held to their native syntax by a structural tag for
    required/named, as vLLM 0.33 does)."""
    text = json.dumps([{"name": n, "parameters": a} for n, a in calls], indent=indent, ensure_ascii=False)
    p = parsers.get_parser(None, "xlam")
    ctx = ParseContext(tools=TOOLS, tool_choice="required")
    assert p.start(ctx, None)["tk"] == "required"  # the guided-JSON array, not the native syntax
    deltas, streamed, _ = run_stream(p, ctx, data.draw(split(text)), roundtrip=True)
    assert streamed == p.parse(ctx, None, text) and call_delta_problems(deltas) == []
    assert [(c.name, json.loads(c.arguments)) for c in streamed.tool_calls] == calls


@settings(max_examples=examples(100), deadline=None)
@given(json_args, st.sampled_from(["", " ", "\n"]), st.data())
def test_guided_named_any_split(args, pad, data):
    """A named tool_choice streams the bare arguments object as that function's arguments (a
    guided-JSON format, xlam: hermes and llama3_json parse their native syntax for a named choice)."""
    text = pad + json.dumps(args, ensure_ascii=False) + pad
    p = parsers.get_parser(None, "xlam")
    ctx = ParseContext(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "f"}})
    assert p.start(ctx, None)["tk"] == "named"  # the guided bare arguments, not the native syntax
    deltas, streamed, _ = run_stream(p, ctx, data.draw(split(text)), roundtrip=True)
    assert streamed == p.parse(ctx, None, text) and call_delta_problems(deltas) == []
    assert [(c.name, json.loads(c.arguments)) for c in streamed.tool_calls] == [("f", args)]
