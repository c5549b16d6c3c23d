"""Behaviour of the qwen3, deepseek_r1 and hermes formats on documented cases and bug reports."""

from __future__ import annotations

import json

import pytest
from conftest import hf_tokenizer

import parsers
from parsers.harness import call_delta_problems, run_stream
from parsers.types import ParseContext, ToolCall

TOOLS = ({"type": "function", "function": {"name": "A"}},)


def parse(reasoning, tool, text, prompt=None, vocab=None, **ctx):
    """Batch parse, after checking that a one-character stream gives the same result."""
    p = parsers.get_parser(reasoning, tool, vocab=vocab)
    context = ParseContext(tools=ctx.pop("tools", TOOLS), **ctx)
    batch = p.parse(context, prompt, text)
    deltas, streamed, _ = run_stream(p, context, list(text), prompt_token_ids=prompt, roundtrip=True)
    assert streamed == batch and call_delta_problems(deltas) == []
    return batch


@pytest.fixture(scope="module")
def qwen_tok():
    return hf_tokenizer("Qwen--Qwen3-0.6B")


def test_registry_names_and_unknown_name():
    """The registry lists the vLLM names; an unknown name raises ValueError naming it."""
    assert {"qwen3", "deepseek_r1"} <= set(parsers.REASONING_PARSERS)
    assert "hermes" in parsers.TOOL_PARSERS
    with pytest.raises(ValueError, match="nope"):
        parsers.get_parser("nope", None)


def test_marker_token_ids_from_vocab(qwen_tok):
    """Marker ids come from the tokenizer vocab (Qwen3: <think>=151667 ... </tool_call>=151658)."""
    p = parsers.get_parser("qwen3", "hermes", vocab=qwen_tok.get_vocab())
    assert p.marker_token_ids == {151667, 151668, 151657, 151658}


def test_qwen3_enable_thinking_switch():
    """qwen3 without </think>: all reasoning by default, all content verbatim with
    enable_thinking=False (a stray </think> kept, as vLLM 0.33's render server gives)."""
    assert parse("qwen3", None, "Hello").reasoning == "Hello"
    off = parse("qwen3", None, "Hello</think>", chat_template_kwargs={"enable_thinking": False})
    assert (off.content, off.reasoning) == ("Hello</think>", None)


def test_qwen3_prompt_closed_reasoning_starts_in_content(qwen_tok):
    """A `</think>` in the prompt's current turn (enable_thinking=False template) → content (BR17/BR19)."""
    prompt = qwen_tok.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    r = parse("qwen3", None, "I am Qwen3.", prompt=prompt, vocab=qwen_tok.get_vocab())
    assert (r.content, r.reasoning) == ("I am Qwen3.", None)
    r1 = parse("deepseek_r1", None, "我是Qwen3。", prompt=prompt, vocab=qwen_tok.get_vocab())
    assert (r1.content, r1.reasoning) == ("我是Qwen3。", None)


def test_qwen3_think_from_earlier_turn_is_ignored(qwen_tok):
    """A `</think>` in an earlier turn does not count; the pre-opened `<think>` of this turn does."""
    prompt = qwen_tok.encode(
        "<|im_start|>assistant\n<think>\nx\n</think>\n\nok<|im_end|>\n"
        "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n"
    )
    r = parse(
        "qwen3",
        None,
        "The user greeted me.\n</think>\n\nHello!",
        prompt=prompt,
        vocab=qwen_tok.get_vocab(),
        chat_template_kwargs={"enable_thinking": False},
    )
    assert (r.reasoning, r.content) == ("The user greeted me.\n", "\n\nHello!")


def test_qwen3_tool_call_ends_reasoning_and_stays_content():
    """`<tool_call>` ends reasoning implicitly; the markup goes to content (reasoning-only parser)."""
    text = "<think>I need to read the file.\n\n<tool_call>\n<function=bash>\n</function>\n</tool_call>"
    r = parse("qwen3", None, text)
    assert r.reasoning == "I need to read the file.\n\n"
    assert r.content == "<tool_call>\n<function=bash>\n</function>\n</tool_call>"


def test_qwen3_duplicate_end_dropped_and_trailing_whitespace_kept():
    """A second `</think>` in content is dropped; trailing reasoning whitespace is kept."""
    r = parse("qwen3", None, "r \n</think>a</think>b")
    assert (r.reasoning, r.content) == ("r \n", "ab")


def test_draft_tool_call_inside_think_is_reasoning():
    """BR25: a call drafted inside <think> is reasoning; only the call after </think> counts."""
    text = (
        '<think>\nlet me call tool A\n<tool_call>{"name": "A", "arguments": {}}</tool_call>\n'
        'then analyse\n</think>\n<tool_call>{"name": "A", "arguments": {}}</tool_call>'
    )
    r = parse("qwen3", "hermes", text)
    assert r.tool_calls == (ToolCall(name="A", arguments="{}"),)
    assert "<tool_call>" in r.reasoning


def test_deepseek_r1_forms():
    """deepseek_r1: optional <think> stripped, no end → all reasoning, markers after end are content."""
    assert parse("deepseek_r1", None, "abc").reasoning == "abc"
    r = parse("deepseek_r1", None, "<think>a</think>b<think>c")
    assert (r.reasoning, r.content) == ("a", "b<think>c")


def test_hermes_literal_end_tag_in_string():
    """BR26: `</tool_call>` inside a JSON string argument does not cut the call."""
    args = {"path": "notes.md", "content": "Close the block with </tool_call> when done."}
    text = "<tool_call>\n" + json.dumps({"name": "write_file", "arguments": args}) + "\n</tool_call>"
    r = parse(None, "hermes", text)
    assert r.content is None and json.loads(r.tool_calls[0].arguments) == args


def test_hermes_parameterless_call_streams_empty_object():
    """BR27: a call with `"arguments": {}` or no arguments key streams `{}`."""
    for body in ['{"name": "get_current_time", "arguments": {}}', '{"name": "get_current_time"}']:
        r = parse(None, "hermes", f"<tool_call>\n{body}\n</tool_call>")
        assert r.tool_calls == (ToolCall(name="get_current_time", arguments="{}"),)


def test_hermes_truncated_call_is_content():
    """BR47: a stream ending before the arguments start gives the raw text back as content."""
    text = '<tool_call>\n{"name": "get_weather", "argu'
    r = parse(None, "hermes", text)
    assert (r.content, r.tool_calls) == (text, ())


def test_hermes_invalid_json_keeps_all_text():
    """An invalid call body makes the call and everything after it content (never lose text)."""
    text = "Hi <tool_call>not json</tool_call> bye"
    assert parse(None, "hermes", text).content == text


def test_hermes_two_calls_indices_and_dropped_text():
    """BR46: parallel calls get indices 0 and 1; text between and after calls is dropped."""
    text = (
        'Sure<tool_call>\n{"name": "add", "arguments": {"a": 2}}\n</tool_call>\nmid\n'
        '<tool_call>\n{"name": "get_weather", "arguments": {"unit": "c"}}\n</tool_call>\nend'
    )
    r = parse(None, "hermes", text)
    assert r.content == "Sure"
    assert [c.name for c in r.tool_calls] == ["add", "get_weather"]


def test_hermes_undeclared_tool_is_kept():
    """A call to a tool the request did not declare is kept (vLLM behaviour, BR48)."""
    text = '<tool_call>{"name": "Apply tags to a document", "arguments": {"tags": ["a"]}}</tool_call>'
    assert parse(None, "hermes", text).tool_calls[0].name == "Apply tags to a document"


def test_tool_choice_none_and_no_tools_leave_markup_as_content():
    """tool_choice=none or a request without tools: no tool parsing, markup stays content."""
    text = '<tool_call>{"name": "A", "arguments": {}}</tool_call>'
    assert parse(None, "hermes", text, tool_choice="none").content == text
    assert parse(None, "hermes", text, tools=None).content == text


def test_tool_choice_required_parses_guided_array():
    """tool_choice=required parses vLLM's guided JSON array of {name, parameters} (a guided-JSON
    parser: hermes is held to its native syntax by a structural tag instead)."""
    text = '[{"name": "a", "parameters": {"x": 1}}, {"name": "b", "parameters": {}}]'
    r = parse(None, "llama3_json", text, tool_choice="required")
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("a", {"x": 1}), ("b", {})]


def test_tool_choice_named_parses_bare_arguments():
    """A named tool_choice: the whole output is the arguments object (BR45), even without a tool parser."""
    choice = {"type": "function", "function": {"name": "get_weather"}}
    for tool in ("xlam", None):
        r = parse(None, tool, '{"city": "Paris"}', tool_choice=choice)
        assert r.tool_calls == (ToolCall(name="get_weather", arguments='{"city": "Paris"}'),)


def test_llama_named_and_required_parse_the_native_calls():
    """vLLM 0.33 constrains llama3_json's named/required choices with xgrammar's ``llama``
    structural tag, so the model writes ``{"name": .., "parameters": ..}`` and that is parsed."""
    text = '{"name": "get_weather", "parameters": {"city": "Paris"}}'
    for choice in ({"type": "function", "function": {"name": "get_weather"}}, "required"):
        r = parse(None, "llama3_json", text, tool_choice=choice)
        calls = [(c.name, json.loads(c.arguments)) for c in r.tool_calls]
        assert calls == [("get_weather", {"city": "Paris"})]


def test_parallel_false_and_include_reasoning_false():
    """parallel_tool_calls=False keeps call 0 only; include_reasoning=False drops reasoning."""
    text = (
        'think</think><tool_call>{"name": "a", "arguments": {}}</tool_call>'
        '<tool_call>{"name": "b", "arguments": {}}</tool_call>'
    )
    r = parse("qwen3", "hermes", text, parallel_tool_calls=False, include_reasoning=False)
    assert r.reasoning is None and [c.name for c in r.tool_calls] == ["a"]


def test_reasoning_ended_tracks_the_stream():
    """reasoning_ended is None without a reasoning parser, False inside reasoning, True after."""
    p = parsers.get_parser("qwen3", "hermes")
    assert parsers.get_parser(None, "hermes").reasoning_ended({}) is None
    state = p.start(ParseContext(tools=TOOLS), None)
    assert p.reasoning_ended(state) is False
    state, _ = p.feed(state, "x</think>")
    assert p.reasoning_ended(state) is True


def test_feed_does_not_modify_its_argument():
    """feed/finish are pure: the state passed in is unchanged, so a retried chunk is safe."""
    p = parsers.get_parser("qwen3", "hermes")
    state = p.start(ParseContext(tools=TOOLS), None)
    state, _ = p.feed(state, 'r</think>x<tool_call>{"name": "A", "arguments": {"k": "v')
    before = json.dumps(state, sort_keys=True)
    p.feed(state, '"}}</tool_call>')
    p.finish(state)
    assert json.dumps(state, sort_keys=True) == before
