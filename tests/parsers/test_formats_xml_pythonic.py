"""XML-style (qwen3_coder, glm, minimax_m2, DSML, seed_oss) and pythonic (pythonic, olmo3, lfm2)
tool-call formats: the subtle behaviours of parsers.md section 9 and the bug reports BR32,
BR33, BR35, BR36, each checked in batch and in one-character streaming with state round trips."""

from __future__ import annotations

import json

import orjson
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import parsers
from parsers.arguments import coerce, compact, python_literal, tool_types
from parsers.harness import call_delta_problems, run_stream
from parsers.types import ParseContext, ParseResult


def fn(name: str, **props: dict) -> dict:
    """An OpenAI tool with the given parameter schemas."""
    return {
        "type": "function",
        "function": {"name": name, "parameters": {"type": "object", "properties": props}},
    }


TOOLS = (
    fn(
        "f",
        x={"type": "integer"},
        n={"type": "number"},
        s={"type": "string"},
        b={"type": "boolean"},
        o={"type": "object", "properties": {"k": {"type": "integer"}}},
        a={"type": "array", "items": {"type": "integer"}},
        u={"anyOf": [{"type": "string"}, {"type": "null"}]},
    ),
    fn("get_weather", city={"type": "string"}),
    {
        "name": "reg",
        "parameters": {"properties": {"age": {"type": "integer"}, "zip_code": {"type": "string"}}},
    },
)


def both(parser: str, text: str, tools=TOOLS, **ctx) -> ParseResult:
    """Batch result, asserting that 1-char streaming with JSON state round trips equals it."""
    p = parsers.get_parser(None, parser)
    context = ParseContext(tools=tools, **ctx)
    batch = p.parse(context, None, text)
    deltas, streamed, _ = run_stream(p, context, list(text), roundtrip=True)
    assert streamed == batch
    assert call_delta_problems(deltas) == []
    return batch


def args(result: ParseResult) -> list[tuple[str, dict]]:
    return [(c.name, json.loads(c.arguments)) for c in result.tool_calls]


def qcall(name: str, **values: str) -> str:
    params = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in values.items())
    return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"


# -- shared converters --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "raw", "want"),
    [
        ({"type": "integer"}, "42", 42),
        ({"type": "integer"}, "2026-01-15", "2026-01-15"),  # BR35: kept as the raw string
        ({"type": "number"}, "2.5", 2.5),
        ({"type": "number"}, "3.0", 3),
        ({"type": "number"}, "inf", "inf"),
        ({"type": "boolean"}, "True", True),
        ({"type": "boolean"}, "0", False),
        ({"type": "string"}, "03106", "03106"),  # BR36
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "null", None),
        ({"type": ["integer", "string"]}, "x1", "x1"),
        ({"type": "object", "properties": {"k": {"type": "integer"}}}, '{"k": "5"}', {"k": 5}),
        ({"type": "array", "items": {"type": "boolean"}}, '["true", false]', [True, False]),
        ({"enum": [1, 2]}, "2", 2),
        ({"type": "int"}, "7", 7),
    ],
)
def test_schema_coercion(schema, raw, want):
    """Raw XML values convert to the schema type in vLLM's priority order; misfits stay raw."""
    got = coerce(raw, compact(schema))
    assert got == want and type(got) is type(want)


def test_tool_types_is_compact_and_accepts_bare_functions():
    """The tool context keeps names and types only (no descriptions) for both tool shapes."""
    ctx = tool_types((fn("f", x={"type": "integer", "description": "long text"}), {"name": "g"}))
    assert ctx == {"names": ["f", "g"], "params": {"f": {"x": {"t": ["integer"]}}}}


def test_python_literal_conversions():
    """Python literals become JSON values; names other than the literal constants are refused."""
    assert python_literal("{'a': (1, -2.5), 'b': {'x'}, 'c': None, 'd': true}") == {
        "a": [1, -2.5],
        "b": ["x"],
        "c": None,
        "d": True,
    }
    assert python_literal("007") == 7
    with pytest.raises(ValueError):
        python_literal("os.system('x')")


def test_pathologically_nested_values_do_not_raise():
    """Nesting deeper than Python can recurse stays a raw string (XML) or content (pythonic)."""
    deep = "[" * 50000 + "]" * 50000
    for name, text in [
        ("qwen3_coder", f"<tool_call><function=f><parameter=a>{deep}</parameter></function></tool_call>"),
        ("pythonic", f"[f(a={deep})]"),
    ]:
        p, ctx = parsers.get_parser(None, name), ParseContext(tools=TOOLS)
        batch = p.parse(ctx, None, text)
        assert run_stream(p, ctx, [text[i : i + 7000] for i in range(0, len(text), 7000)])[1] == batch
        if name == "pythonic":
            assert batch.content == text
        else:
            assert json.loads(batch.tool_calls[0].arguments) == {"a": deep}


# -- qwen3_coder family -----------------------------------------------------------------


def test_qwen3_coder_schema_types_and_newline_trim():
    """Typed values are coerced, and exactly one leading and trailing newline is trimmed."""
    text = qcall("f", x="42", n="1.5", b="true", o='{"k": "3"}', a="[1, 2]", u="null", s="\nA\n")
    r = both("qwen3_coder", text)
    assert args(r) == [
        ("f", {"x": 42, "n": 1.5, "b": True, "o": {"k": 3}, "a": [1, 2], "u": None, "s": "\nA\n"})
    ]
    assert r.content is None


def test_br36_string_typed_zip_code_and_untyped_values_stay_strings():
    """BR36: '03106' typed string stays a string; a parameter without schema stays a string."""
    text = qcall("reg", age="32", zip_code="03106") + qcall("nodecl", count="5")
    assert args(both("qwen3_coder", text)) == [
        ("reg", {"age": 32, "zip_code": "03106"}),
        ("nodecl", {"count": "5"}),
    ]


def test_br35_non_numeric_integer_keeps_the_call():
    """BR35: a date for an integer parameter keeps the call with the raw string."""
    assert args(both("qwen3_coder", qcall("f", x="2026-01-15"))) == [("f", {"x": "2026-01-15"})]


def test_br32_text_after_call_kept_in_both_modes():
    """BR32: visible text after a valid call is content in batch and streaming alike."""
    text = (
        "before<tool_call><function=get_weather><parameter=city>Paris</parameter></function></tool_call>after"
    )
    r = both("qwen3_coder", text)
    assert r.content == "beforeafter" and args(r) == [("get_weather", {"city": "Paris"})]


def test_qwen3_coder_bare_function_and_unclosed_parameter():
    """A bare <function= is a call; an unclosed parameter is closed by the next opener."""
    text = "<function=f>\n<parameter=s>\nabc\n<parameter=x>\n3\n</parameter>\n</function>"
    assert args(both("qwen3_coder", text)) == [("f", {"s": "abc", "x": 3})]


def test_qwen3_coder_content_keeps_whitespace_and_whitespace_between_calls_dropped():
    """Content before a call keeps its whitespace as vLLM 0.33's stream sends it (its batch
    strips it: ours equals one of its answers); whitespace-only content before a call and
    whitespace between calls are dropped."""
    text = "Sure. \n" + qcall("get_weather", city="A") + "\n\n" + qcall("get_weather", city="B") + "\n"
    r = both("qwen3_coder", text)
    assert r.content == "Sure. \n" and [a["city"] for _, a in args(r)] == ["A", "B"]
    r = both("qwen3_coder", " \n\t" + qcall("get_weather", city="A"))
    assert r.content is None and [a["city"] for _, a in args(r)] == ["A"]


def test_qwen3_coder_block_without_call_is_content():
    """A <tool_call> block with no function opener is given back verbatim (no lost output)."""
    text = 'x <tool_call>{"name": "f"}</tool_call> y'
    r = both("qwen3_coder", text)
    assert r.content == text and r.tool_calls == ()


def test_qwen3_coder_string_values_stream_before_close_and_typed_values_wait():
    """String values stream as JSON-escaped fragments; typed values appear only when closed."""
    p = parsers.get_parser(None, "qwen3_coder")

    def sent(*chunks: str) -> str:
        state = p.start(ParseContext(tools=TOOLS), None)
        out = []
        for chunk in chunks:
            state, deltas = p.feed(orjson.loads(orjson.dumps(state)), chunk)
            out += [c.arguments or "" for d in deltas for c in d.tool_calls]
        return "".join(out)

    assert (
        sent('<tool_call>\n<function=f>\n<parameter=s>\nsay "hi"', "\nmore") == '{"s": "say \\"hi\\"\\nmore'
    )
    assert sent("<tool_call>\n<function=f>\n<parameter=x>\n4", "2\n</para") == "{"
    assert sent("<tool_call>\n<function=f>\n<parameter=x>\n42\n</parameter>") == '{"x": 42'


def test_qwen3_coder_state_flat_while_string_value_streams():
    """A streamed string value is not kept in the state: its size stays flat."""
    p = parsers.get_parser(None, "qwen3_coder")
    chunks = ["<tool_call>\n<function=f>\n<parameter=s>\n"] + ["word " * 20] * 30
    _, _, states = run_stream(p, ParseContext(tools=TOOLS), chunks, roundtrip=True)
    sizes = [len(orjson.dumps(s)) for s in states[1:]]
    assert max(sizes) - min(sizes) < 16


def test_qwen3_coder_required_tool_choice_parses_native_xml():
    """vLLM constrains qwen3_coder with structural tags: required/named parse the XML itself."""
    r = both("qwen3_coder", qcall("get_weather", city="Rome"), tool_choice="required")
    assert args(r) == [("get_weather", {"city": "Rome"})]


def test_tool_choice_none_strips_markup_of_engine_formats():
    """tool_choice="none": engine formats still remove their markup, the calls are dropped."""
    r = both("qwen3_coder", "Answer. " + qcall("get_weather", city="Rome") + " bye", tool_choice="none")
    assert r.tool_calls == () and r.content == "Answer.  bye"
    assert both("pythonic", "[f(x=1)]", tool_choice="none").content == "[f(x=1)]"


def test_seed_oss_malformed_header_keeps_sibling():
    """A header without '>' drops only its own call (vLLM #46314)."""
    text = (
        "<seed:tool_call>\n<function=broken</function>\n</seed:tool_call>"
        "<seed:tool_call>\n<function=get_weather>\n<parameter=city>Tokyo</parameter>\n</function>\n</seed:tool_call>"
    )
    r = both("seed_oss", text)
    assert args(r) == [("get_weather", {"city": "Tokyo"})] and r.content is None


# -- glm, minimax, DSML -------------------------------------------------------------------


def test_glm_values_verbatim_typed_and_unknown_tool_dropped():
    """GLM keeps whitespace of string values, coerces typed ones and drops undeclared tools."""
    text = (
        "Checking. <tool_call>f\n<arg_key>x</arg_key>\n<arg_value>7</arg_value>\n<arg_key>s</arg_key>"
        "<arg_value> pad </arg_value></tool_call>"
        "<tool_call>nope<arg_key>a</arg_key><arg_value>1</arg_value></tool_call>"
    )
    r = both("glm45", text)
    assert r.content == "Checking." and args(r) == [("f", {"x": 7, "s": " pad "})]


def test_glm47_inline_and_zero_arguments():
    """GLM-4.7 writes no newlines; a call without arguments has '{}'."""
    r = both("glm47", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Oslo</arg_value></tool_call>")
    assert args(r) == [("get_weather", {"city": "Oslo"})]
    assert both("glm47", "<tool_call>f</tool_call>").tool_calls[0].arguments == "{}"


def test_minimax_name_quoting_and_schema():
    """MiniMax invoke/parameter names may be double-, single- or unquoted; values coerced."""
    text = (
        "<minimax:tool_call><invoke name=f><parameter name='x'>5</parameter>"
        '<parameter name="s"> a </parameter></invoke></minimax:tool_call>'
    )
    assert args(both("minimax_m2", text)) == [("f", {"x": 5, "s": " a "})]


def test_dsml_string_false_decoding_coercion_and_unwrap():
    """DSML: string="false" values are JSON-decoded then coerced; a lone undeclared
    'arguments' wrapper is unwrapped; text after the block is dropped, content kept verbatim."""
    d = "｜DSML｜"
    text = (
        f'Let me see. <{d}function_calls>\n<{d}invoke name="f">\n'
        f'<{d}parameter name="arguments" string="false">{{"x": "3", "s": "q"}}</{d}parameter>\n'
        f'</{d}invoke>\n<{d}invoke name="f">\n<{d}parameter name="s" string="false">12</{d}parameter>\n'
        f'<{d}parameter name="x" string="true">4</{d}parameter>\n</{d}invoke>\n</{d}function_calls> bye'
    )
    r = both("deepseek_v32", text)
    assert r.content == "Let me see. "
    assert args(r) == [("f", {"x": 3, "s": "q"}), ("f", {"s": "12", "x": 4})]


def test_deepseek_v4_wrapper_and_v32_wrapper_as_content():
    """V4 parses <｜DSML｜tool_calls>; the V3.2 wrapper is plain content but its invoke is a call."""
    d = "｜DSML｜"
    param = f'<{d}parameter name="city" string="true">Rome</{d}parameter>'
    inner = f'<{d}invoke name="get_weather">\n{param}\n</{d}invoke>\n'
    r = both("deepseek_v4", f"<{d}function_calls>\n{inner}</{d}function_calls>")
    assert r.content == f"<{d}function_calls>\n" and args(r) == [("get_weather", {"city": "Rome"})]


# -- pythonic family ------------------------------------------------------------------------


def test_br33_trailing_prose_and_leading_underscore_name():
    """BR33: a call list followed by prose keeps both; names may start with '_'."""
    r = both("pythonic", "[get_weather(city='Paris')] I'll summarize once I have the result.")
    assert args(r) == [("get_weather", {"city": "Paris"})]
    assert r.content == " I'll summarize once I have the result."
    assert args(both("llama4_pythonic", "[_private_lookup(key='a')]")) == [("_private_lookup", {"key": "a"})]


def test_pythonic_exact_json_and_non_call_list_is_content():
    """Arguments equal json.dumps of the literal dict; a list of values is content."""
    r = both("pythonic", "[f(a=1, b='x', c={'k': [True, None]}), g()]")
    assert [c.arguments for c in r.tool_calls] == ['{"a": 1, "b": "x", "c": {"k": [true, null]}}', "{}"]
    assert both("pythonic", "[1, 2] are numbers").content == "[1, 2] are numbers"


def test_pythonic_name_waits_for_a_complete_argument():
    """Streaming emits only what cannot change: no name before the first argument is complete."""
    p = parsers.get_parser(None, "pythonic")
    state = p.start(ParseContext(tools=TOOLS), None)
    state, out = p.feed(state, "[get_weather(city='Par")
    assert out == []
    state, out = p.feed(state, "is')]")
    assert out[0].tool_calls[0].name == "get_weather"


def test_python_start_with_prose_around():
    """<|python_start|> may follow prose; text before and after the block is content."""
    r = both("llama4_pythonic", "Let me look. <|python_start|>[get_weather(city='Mars')]<|python_end|> Done.")
    assert r.content == "Let me look.  Done." and args(r) == [("get_weather", {"city": "Mars"})]


def test_olmo3_newline_separated_calls_with_json_literals():
    """olmo3: calls separated by newlines inside <function_calls>; true/false/null allowed."""
    r = both("olmo3", "<function_calls>\nf(a=true, b=null)\ng(c=[1, 2])\n</function_calls>")
    assert args(r) == [("f", {"a": True, "b": None}), ("g", {"c": [1, 2]})] and r.content is None


def test_lfm2_repairs_and_prose_after_block():
    """lfm2: nested quotes, raw newline/NUL, leading-zero ints, sets and reserved names repaired;
    prose after <|tool_call_end|> is content."""
    text = (
        "<|tool_call_start|>[bash(command='sed -n '360,450p' f.py', n=07, tags={'a'}, "
        "script='x\ny\x00', class='c')]<|tool_call_end|>Checking now."
    )
    r = both("lfm2", text)
    assert args(r) == [
        (
            "bash",
            {"command": "sed -n '360,450p' f.py", "n": 7, "tags": ["a"], "script": "x\ny\x00", "class": "c"},
        )
    ]
    assert r.content == "Checking now."


# -- properties ----------------------------------------------------------------------------

XML_PIECES = [
    "<tool_call>", "</tool_call>", "<function=", "f>", "get_weather>", "</function>", "<parameter=",
    "x>", "s>", "city>", "</parameter>", "\n", " ", "42", "a<b", '"q"', "é数", "<arg_key>", "</arg_key>",
    "<arg_value>", "</arg_value>", "<minimax:tool_call>", "<invoke name=", '"f">', "<parameter name=",
    "</invoke>", "<｜DSML｜function_calls>", '<｜DSML｜invoke name="f">',
    '<｜DSML｜parameter name="x" string="false">', "</｜DSML｜parameter>", "</｜DSML｜invoke>",
    "<seed:tool_call>", "</seed:tool_call>",
]  # fmt: skip
PY_PIECES = [
    "[", "]", "f(", "get_weather(", ")", "x=", "s=", "'a'", '"b\\"c"', "1", "-2.5", "{'k': ", "}", ", ",
    "None", "true", "\n", " ", "<|python_start|>", "<|python_end|>", "<|tool_call_start|>",
    "<|tool_call_end|>", "<function_calls>", "</function_calls>", "prose", "'it's'", "07",
]  # fmt: skip
XML_PARSERS = "qwen3_coder qwen3_xml step3p5 seed_oss glm45 glm47 minimax_m2 deepseek_v32 deepseek_v4".split()
PY_PARSERS = ["pythonic", "llama4_pythonic", "olmo3", "lfm2"]


@st.composite
def output_and_chunks(draw, pieces):
    text = "".join(draw(st.lists(st.sampled_from(pieces) | st.text("ab<>=/\n", max_size=3), max_size=25)))
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=8)))
    bounds = [0, *[c for c in cuts if c < len(text)], len(text)]
    return text, [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


@settings(max_examples=examples(150), deadline=None)
@given(st.sampled_from(XML_PARSERS + PY_PARSERS), st.data())
def test_any_output_any_chunking_stream_equals_batch(parser, data):
    """For arbitrary tag soup and any chunking (state through JSON), joined stream == batch,
    tool-call deltas follow the name-first rules and no text is invented."""
    pieces = XML_PIECES if parser in XML_PARSERS else PY_PIECES
    text, chunks = data.draw(output_and_chunks(pieces))
    p = parsers.get_parser(None, parser)
    ctx = ParseContext(tools=TOOLS)
    batch = p.parse(ctx, None, text)
    deltas, streamed, _ = run_stream(p, ctx, chunks, roundtrip=True)
    assert streamed == batch
    assert call_delta_problems(deltas) == []
    for call in batch.tool_calls:
        assert isinstance(json.loads(call.arguments), dict)


xml_text = st.text(alphabet='ab <>/="\\\n\té数😀', max_size=12)


@settings(max_examples=examples(150), deadline=None)
@given(st.dictionaries(st.sampled_from(["s", "city", "free"]), xml_text, max_size=3), st.data())
def test_qwen3_coder_string_values_round_trip_any_chunking(values, data):
    """Any string value (with '<', quotes, newlines) comes back exactly, newline-trimmed once,
    however the output is split."""
    values = {k: v for k, v in values.items() if "</parameter>" not in v and "<parameter=" not in v}
    values = {k: v for k, v in values.items() if "</function>" not in v and "</tool_call>" not in v}
    text = "<tool_call>\n<function=f>\n" + "".join(
        f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in values.items()
    )
    text += "</function>\n</tool_call>"
    cuts = sorted(data.draw(st.sets(st.integers(1, len(text) - 1), max_size=10)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    p = parsers.get_parser(None, "qwen3_coder")
    _, result, _ = run_stream(p, ParseContext(tools=TOOLS), chunks, roundtrip=True)
    assert args(result) == [("f", values)]


py_value = st.recursive(
    st.none() | st.booleans() | st.integers(-99, 99) | st.text(alphabet="ab '\"\\\n]),数", max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text("kq", max_size=2), inner, max_size=2),
    max_leaves=5,
)


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(
        st.dictionaries(st.sampled_from(["a", "b_1", "cls"]), py_value, max_size=3), min_size=1, max_size=3
    ),
    st.data(),
)
def test_pythonic_literals_round_trip_any_chunking(calls, data):
    """Python reprs of JSON-like values come back as the same JSON, exactly json.dumps-spaced."""
    text = "[" + ", ".join("f(" + ", ".join(f"{k}={v!r}" for k, v in c.items()) + ")" for c in calls) + "]"
    cuts = sorted(data.draw(st.sets(st.integers(1, len(text) - 1), max_size=10)))
    chunks = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    _, result, _ = run_stream(
        parsers.get_parser(None, "pythonic"), ParseContext(tools=TOOLS), chunks, roundtrip=True
    )
    assert [c.arguments for c in result.tool_calls] == [json.dumps(c, ensure_ascii=False) for c in calls]
    assert result.content is None
