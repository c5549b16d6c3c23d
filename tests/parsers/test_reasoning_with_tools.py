"""A reasoning parser and a tool parser of the same family composed (the reasoning phase hands
its content to the tool phase): reasoning ends where the calls start, and reasoning markers
inside call arguments are argument text (vLLM 0.33's engine parsers are in their tool states
there). Every case runs in batch and in a one-character-per-chunk stream with state JSON round
trips, which must agree."""

from __future__ import annotations

import orjson
import pytest

import parsers
from parsers import machine
from parsers.harness import run_stream
from parsers.types import ParseContext, ParseResult

TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    },
)
CTX = ParseContext(tools=TOOLS, tool_choice="auto")


def both(reasoning: str, tool: str, text: str) -> ParseResult:
    """Batch result, asserted equal to the char-by-char stream with orjson round trips."""
    p = parsers.get_parser(reasoning, tool)
    batch = p.parse(CTX, None, text)
    _, streamed, _ = run_stream(p, CTX, list(text), roundtrip=True)
    assert streamed == batch
    return batch


def calls(result: ParseResult) -> list[tuple[str, dict]]:
    return [(c.name, orjson.loads(c.arguments)) for c in result.tool_calls]


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        ('[THINK]Need it.[/THINK]Sure.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', "Need it.", "Sure."),
        ('[THINK]Need it.[TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}', "Need it.", None),
        ('[THINK]Need it.\n[/THINK]\n\n[TOOL_CALLS]get_weather{"city": "Paris"}', "Need it.", None),
        (
            '<think>Need it.</think>[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}]',
            "Need it.",
            None,
        ),
    ],
)
def test_mistral_tool_calls_end_reasoning_and_reach_the_tool_parser(text, reasoning, content):
    """Mistral: ``[TOOL_CALLS]`` ends reasoning (with or without ``[/THINK]``) and is handed to
    the mistral tool parser, which parses the v11 and pre-v11 call syntax after it."""
    result = both("mistral", "mistral", text)
    assert (result.reasoning, result.content) == (reasoning, content)
    assert calls(result) == [("get_weather", {"city": "Paris"})]
    assert len(result.tool_calls[0].id) == 9


def test_mistral_think_markers_inside_arguments_are_argument_text():
    """Mistral: ``[THINK]``/``<think>``/``[/THINK]`` inside call arguments neither reopen
    reasoning nor get dropped as stray end markers, in the first and in a later call."""
    text = (
        '[THINK]r[/THINK][TOOL_CALLS]get_weather[ARGS]{"city": "<think>P</think>[THINK]"}'
        '[TOOL_CALLS]get_weather{"city": "[/THINK]x"}'
    )
    result = both("mistral", "mistral", text)
    assert (result.reasoning, result.content) == ("r", None)
    assert calls(result) == [
        ("get_weather", {"city": "<think>P</think>[THINK]"}),
        ("get_weather", {"city": "[/THINK]x"}),
    ]


def test_mistral_reasoning_alone_keeps_the_call_text_as_content():
    """Mistral reasoning without a tool parser: everything from ``[TOOL_CALLS]`` on is content,
    think markers included."""
    result = both("mistral", None, "[THINK]a[TOOL_CALLS]b[THINK]c")
    assert (result.reasoning, result.content) == ("a", "[TOOL_CALLS]b[THINK]c")


KIMI_CALL = (
    "<|tool_call_begin|>functions.get_weather:{n}<|tool_call_argument_begin|>"
    '{{"city": "{city}"}}<|tool_call_end|>'
)


def kimi_section(*cities: str) -> str:
    inner = "".join(KIMI_CALL.format(n=i, city=c) for i, c in enumerate(cities))
    return f"<|tool_calls_section_begin|>{inner}<|tool_calls_section_end|>"


@pytest.mark.parametrize(
    ("text", "reasoning", "content"),
    [
        ("<think>Need weather.</think>Checking. " + kimi_section("Paris"), "Need weather.", "Checking. "),
        ("<think>Need weather.\n</think>\n\n" + kimi_section("Paris"), "Need weather.", None),
        ("Need weather.</think>" + kimi_section("Paris"), "Need weather.", None),
        ("Need weather." + kimi_section("Paris"), "Need weather.", None),
    ],
)
def test_kimi_think_block_then_tool_section(text, reasoning, content):
    """Kimi K2: a think block (explicit, template-opened, or ended by the section itself) then
    a tool section: reasoning, content before the section, and the call with Kimi's native id."""
    result = both("kimi_k2", "kimi_k2", text)
    assert (result.reasoning, result.content) == (reasoning, content)
    assert calls(result) == [("get_weather", {"city": "Paris"})]
    assert result.tool_calls[0].id == "functions.get_weather:0"


def test_kimi_think_end_inside_arguments_is_argument_text():
    """Kimi K2: a ``</think>`` inside call arguments after reasoning ended is not a stray end
    marker to drop; both calls of the section keep their arguments and ids."""
    result = both("kimi_k2", "kimi_k2", "<think>r</think>" + kimi_section("</think>", "Rome"))
    assert (result.reasoning, result.content) == ("r", None)
    assert calls(result) == [("get_weather", {"city": "</think>"}), ("get_weather", {"city": "Rome"})]
    assert [c.id for c in result.tool_calls] == ["functions.get_weather:0", "functions.get_weather:1"]


def test_qwen3_think_end_inside_hermes_arguments_is_argument_text():
    """qwen3 + hermes: ``</think>`` inside a call in content is argument text (the qwen3
    reasoning phase drops stray ends only outside calls)."""
    text = '<think>r</think><tool_call>{"name": "get_weather", "arguments": {"city": "</think>"}}</tool_call>'
    result = both("qwen3", "hermes", text)
    assert result.reasoning == "r"
    assert calls(result) == [("get_weather", {"city": "</think>"})]


def test_unicode_whitespace_before_an_xml_call_is_dropped_and_held_text_is_bounded():
    """The folded trailing-text hold (``hold_trailing`` with ``ANY_WHITESPACE``) drops any
    Unicode whitespace before a glm45 call like ``str.strip`` (qwen3_coder: only content that
    is whitespace alone), and never holds more than ``machine.MAX_TRAILING`` characters however
    long the run."""
    glm_call = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"
    result = both("glm45", "glm45", "</think>Hi\u3000\u00a0\n" + glm_call)
    assert result.content == "Hi"
    assert calls(result) == [("get_weather", {"city": "Paris"})]
    call = (
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "</function>\n</tool_call>"
    )
    result = both("qwen3", "qwen3_coder", "</think>\u3000\u00a0\n" + call)
    assert result.content is None
    assert calls(result) == [("get_weather", {"city": "Paris"})]
    for name in ("glm45", "qwen3_coder"):
        p = parsers.get_parser(None, name)
        _, _, states = run_stream(p, CTX, ["" if name == "qwen3_coder" else "Hi",
                                           " " * (machine.MAX_TRAILING * 4)])
        assert len(states[-1]["t"]["hold"]) <= machine.MAX_TRAILING


def test_readme_lists_every_registered_parser_name():
    """README's Parsers section names every registered reasoning and tool parser (it is the
    user-facing list of accepted ``--reasoning-parser`` / ``--tool-call-parser`` values)."""
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("## Parsers", 1)[1].split("\n## ", 1)[0]
    listed = {
        kind: line
        for kind, line in (
            ("reasoning", section.split("`--reasoning-parser`:", 1)[1].split("\n- ", 1)[0]),
            ("tool", section.split("`--tool-call-parser`:", 1)[1].split("\n\n", 1)[0]),
        )
    }
    for name in parsers.REASONING_PARSERS:
        assert f"`{name}`" in listed["reasoning"], name
    for name in parsers.TOOL_PARSERS:
        assert f"`{name}`" in listed["tool"], name
