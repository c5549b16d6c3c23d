"""JSON tool-call families (fmt2): llama3_json/llama4_json, mistral, granite, granite4,
granite-20b-fc, internlm, jamba, xlam, phi4_mini_json, longcat, hunyuan_a13b, ernie45,
gigachat3 — their subtle behaviours (parsers.md sections 3 and 9, bug cases) and the engine
extensions they use. Every check runs batch and a char-by-char stream with JSON state round
trips, and asserts both agree."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import model_dir

import parsers
from parsers.formats.mistral_tools import mistral_id
from parsers.harness import call_delta_problems, run_stream
from parsers.types import ParseContext, ParseResult

TOOLS = ({"type": "function", "function": {"name": "f", "parameters": {}}},)


def parse(name: str, text: str, **ctx: object) -> ParseResult:
    """Batch result, after checking that a char-by-char stream (state through JSON) equals it
    and follows the client rules (name once, complete, first; indices in order)."""
    parser = parsers.get_parser(None, name)
    context = ParseContext(tools=TOOLS, **ctx)  # type: ignore[arg-type]
    batch = parser.parse(context, None, text)
    deltas, joined, _ = run_stream(parser, context, list(text), roundtrip=True)
    assert joined == batch
    assert call_delta_problems(deltas) == []
    return batch


def calls(result: ParseResult) -> list[tuple[str, object]]:
    return [(c.name, json.loads(c.arguments)) for c in result.tool_calls]


# -- llama3_json / llama4_json -----------------------------------------------------------


@pytest.mark.parametrize("name", ["llama3_json", "llama4_json"])
def test_llama_python_tag_and_semicolon_separated_calls(name):
    """`<|python_tag|>` is dropped and `; `-joined objects are separate calls; `parameters`
    and `arguments` are both accepted."""
    out = parse(name, '<|python_tag|>{"name": "a", "parameters": {"x": 1}}; {"name": "b", "arguments": {}}')
    assert out.content is None
    assert calls(out) == [("a", {"x": 1}), ("b", {})]


def test_llama4_python_start_wrapper_is_a_call_bug_br39():
    """BR39: `<|python_start|>{...}<|python_end|>` is a call, not content."""
    out = parse("llama4_json", '<|python_start|>{"name": "s", "parameters": {"query": "n"}}<|python_end|>')
    assert (out.content, calls(out)) == (None, [("s", {"query": "n"})])


def test_llama_call_followed_by_prose_bug_br38():
    """BR38: a call followed by plain text is still a call; the trailing prose is dropped."""
    out = parse("llama3_json", '{"type": "function", "name": "g", "parameters": {}} \n\nWould you like more?')
    assert calls(out) == [("g", {})]
    assert out.content is None


def test_llama_prose_before_call_stays_content_without_trailing_space():
    """Our one rule for batch and stream: prose before the call is content (it was already
    streamed), the whitespace just before the call is dropped."""
    out = parse("llama3_json", 'Here: {"name": "g", "parameters": {}}')
    assert (out.content, calls(out)) == ("Here:", [("g", {})])


def test_llama_object_without_arguments_or_braces_in_prose_stay_content():
    """An object without arguments is not a call, and `{` in prose is given back verbatim."""
    text = 'Code {x}: {"name": "toolWithoutParams"} ok'
    out = parse("llama3_json", text)
    assert (out.content, out.tool_calls) == (text, ())


def test_llama_rejected_braces_after_a_call_are_dropped_with_the_prose():
    """A `{` in prose after a call is not a call; it is dropped with the rest of the trailing
    prose (before the first call such text is content)."""
    out = parse("llama3_json", '{"name": "s", "parameters": {}} I used {searchTool}; {"q": 1}.')
    assert (out.content, calls(out)) == (None, [("s", {})])


@pytest.mark.parametrize(
    ("name", "text", "content"),
    [
        (
            "llama3_json",
            '{"name": "f", "parameters": {x ; {"name": "f", "parameters": {"a": 1}}',
            '{"name": "f", "parameters": {x ;',
        ),
        (
            "inkling",
            '<|content_invoke_tool_json|>{"name": "f", "args": {x<|end_message|>'
            '<|content_invoke_tool_json|>{"name": "f", "args": {"a": 1}}<|end_message|>',
            '<|content_invoke_tool_json|>{"name": "f", "args": {x<|end_message|>',
        ),
    ],
)
def test_rejected_unbalanced_arguments_end_at_the_offending_character(name, text, content):
    """Arguments that do not start like JSON (`{x`, never closed) reject the body at that
    character: the text after it is scanned again, so the next call is found, batch and for
    every two-chunk split (the scan of the bad body used to run on to the end of the chunk,
    swallowing the next call when it came in the same chunk)."""
    out = parse(name, text)
    assert (out.content, calls(out)) == (content, [("f", {"a": 1})])
    parser, context = parsers.get_parser(None, name), ParseContext(tools=TOOLS)
    for i in range(len(text) + 1):
        assert run_stream(parser, context, [text[:i], text[i:]], roundtrip=True)[1] == out, i


def test_llama_non_ascii_arguments_stream_literally_bug_br29():
    """BR29: non-ASCII argument text is streamed as generated (no `\\u00fc`), once."""
    out = parse("llama3_json", '{"name": "w", "parameters": {"city": "Münster"}}')
    assert out.tool_calls[0].arguments == '{"city": "Münster"}'


# -- mistral ---------------------------------------------------------------------------------


def test_mistral_v11_forms_multiple_calls_and_trailing_text():
    """`name[ARGS]{json}` and `name{json}` both work, `[TOOL_CALLS]` repeats per call,
    arguments are verbatim, text after the JSON is dropped (gh#48975)."""
    out = parse("mistral", 'hi [TOOL_CALLS]add[ARGS]{"a": 1}[TOOL_CALLS]mul{"b":2} Estimating...')
    assert out.content == "hi"
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("add", '{"a": 1}'), ("mul", '{"b":2}')]


def test_mistral_truncated_arguments_are_kept_verbatim():
    """A truncated v11 JSON value is kept as generated (vLLM `complex` case)."""
    out = parse("mistral", 'x{x[TOOL_CALLS]bash{"command": "re.compile(r\'{}\')')
    assert out.content == "x{x"
    assert out.tool_calls[0].arguments == '{"command": "re.compile(r\'{}\')'


def test_mistral_pre_v11_array_with_arguments_before_name():
    """Pre-v11 JSON array; a call whose arguments come first is sent once the name is known."""
    out = parse(
        "mistral",
        '[TOOL_CALLS] [{"arguments": {"name": "J"}, "name": "get_age"}, {"name": "b", "arguments": {}}]x',
    )
    assert calls(out) == [("get_age", {"name": "J"}), ("b", {})]
    assert out.content is None


def test_mistral_non_call_after_marker_stays_content():
    """`[TOOL_CALLS]` followed by prose (not a name, not JSON) is given back as content
    without the control token (vLLM pre-v11: `[TOOL_CALLS] not json at all` → `not json at all`)."""
    assert parse("mistral", "[TOOL_CALLS] not json at all") == ParseResult(content="not json at all")
    assert parse("mistral", "Hi [TOOL_CALLS] I cannot {x}") == ParseResult(content="Hi I cannot {x}")
    assert parse("mistral", "[TOOL_CALLS]toolname_no_args") == ParseResult(content="toolname_no_args")


def test_mistral_ids_are_9_alphanumerics_deterministic_and_positional_bug_br43():
    """BR43: ids match ^[a-zA-Z0-9]{9}$; the same call gets the same id on a retry, calls at
    other conversation positions (index or history_tool_call_cnt) get other ids."""
    text = "[TOOL_CALLS]a{}[TOOL_CALLS]a{}"
    first = [c.id for c in parse("mistral", text).tool_calls]
    again = [c.id for c in parse("mistral", text).tool_calls]
    later = [c.id for c in parse("mistral", text, history_tool_call_cnt=2).tool_calls]
    assert all(re.fullmatch(r"[a-zA-Z0-9]{9}", i or "") for i in first + later)
    assert first == again and first[0] != first[1] and later[0] == mistral_id(2, "a") != first[0]


def test_mistral_required_tool_choice_parses_native_syntax():
    """tool_choice=required/named parse `[TOOL_CALLS]` natively (vLLM supports_required_and_named=False)."""
    out = parse("mistral", '[TOOL_CALLS]f{"k": 1}', tool_choice="required")
    assert calls(out) == [("f", {"k": 1})]
    named = {"type": "function", "function": {"name": "f"}}
    assert calls(parse("mistral", '[TOOL_CALLS]f[ARGS]{"k": 2}', tool_choice=named)) == [("f", {"k": 2})]


def test_mistral_forced_choice_accepts_the_guided_bare_array():
    """Pre-v11 required/named: vLLM's guided schema yields a bare `[{"name","arguments"}]`
    array without `[TOOL_CALLS]`; under auto the same text is plain content."""
    text = ' [{"name": "f", "arguments": {"k": 1}}]'
    assert calls(parse("mistral", text, tool_choice="required")) == [("f", {"k": 1})]
    assert parse("mistral", text) == ParseResult(content=text)
    assert parse("mistral", "No [1]", tool_choice="required") == ParseResult(content="No [1]")
    assert parse("mistral", " [1, 2]", tool_choice="required") == ParseResult(content=" [1, 2]")


def test_string_arguments_are_decoded_where_vllm_keeps_them():
    """mistral pre-v11 / xlam / gigachat3 keep string `arguments` as the arguments text."""
    out = parse("mistral", '[TOOL_CALLS][{"name": "f", "arguments": "{\\"a\\": 1}"}]')
    assert out.tool_calls[0].arguments == '{"a": 1}'
    assert parse("xlam", '[{"arguments": "{}", "name": "f"}]').tool_calls[0].arguments == "{}"


# -- granite family --------------------------------------------------------------------------


@pytest.mark.parametrize("marker", ["<|tool_call|>", "<tool_call>"])
def test_granite_array_keeps_prose_before_and_after(marker):
    """Granite 3.0/3.1: marker + JSON array, no closer; prose around it is content;
    arguments may precede the name."""
    out = parse(
        "granite",
        f'Sure {marker} [{{"arguments": {{"x": 1}}, "name": "a"}}, {{"name": "b", "arguments": {{}}}}] after',
    )
    assert out.content == "Sure after"
    assert calls(out) == [("a", {"x": 1}), ("b", {})]


def test_granite4_calls_are_emitted_whole_at_the_closer():
    """granite4: no tool-call delta before `</tool_call>` arrives, then name and full
    arguments at once; text outside calls is content."""
    parser = parsers.get_parser(None, "granite4")
    ctx = ParseContext(tools=TOOLS)
    chunks = ['A <tool_call>{"name": "a", ', '"arguments": {"x": 1}}', "\n</tool_", "call> B"]
    deltas, joined, _ = run_stream(parser, ctx, chunks, roundtrip=True)
    with_calls = [d for d in deltas if d.tool_calls]
    assert len(with_calls) == 1 and with_calls[0].tool_calls[0].arguments == '{"x": 1}'
    assert joined.content == "A B" and calls(joined) == [("a", {"x": 1})]


def test_granite4_unclosed_call_is_content():
    """granite4 enforces `</tool_call>`: an unclosed call is not a call, its text is content."""
    text = 'Hi <tool_call>{"name": "a", "arguments": {}}'
    assert parse("granite4", text) == ParseResult(content=text)


def test_granite_20b_fc_repeated_function_call_markers():
    """granite-20b-fc: `<function_call> {json}` repeated; content before the first marker."""
    out = parse(
        "granite-20b-fc",
        'ok <function_call> {"name": "a", "arguments": {}}\n'
        '<function_call> {"name": "b", "arguments": {"t": "x"}}',
    )
    assert (out.content, calls(out)) == ("ok", [("a", {}), ("b", {"t": "x"})])


# -- other JSON families ---------------------------------------------------------------------


def test_internlm_plugin_call_with_parameters():
    """internlm: `<|action_start|><|plugin|>{name, parameters}<|action_end|>`."""
    out = parse(
        "internlm",
        'Let me look.<|action_start|><|plugin|>{"name": "w", "parameters": {"c": "T"}}<|action_end|>',
    )
    assert (out.content, calls(out)) == ("Let me look.", [("w", {"c": "T"})])


def test_jamba_lone_space_before_calls_is_no_content():
    """jamba: `<tool_calls>[...]</tool_calls>`; a whitespace-only content before it is None."""
    out = parse(
        "jamba",
        ' <tool_calls>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 2}}]</tool_calls>',
    )
    assert (out.content, calls(out)) == (None, [("a", {}), ("b", {"x": 2})])


@pytest.mark.parametrize(
    ("text", "content"),
    [
        ('I will.\n```json\n[{"name": "a", "arguments": {}}]\n```', "I will."),
        ('<think>plan</think>[{"name": "a", "arguments": {}}]', "<think>plan</think>"),
        ('Weather.<tool_call>[{"name": "a", "arguments": {}}]</tool_call>', "Weather."),
        ('[TOOL_CALLS][{"name": "a", "arguments": {}}]', None),
        ('see [1] and [] then [{"name": "a", "arguments": {}}] done', "see [1] and [] then done"),
    ],
)
def test_xlam_array_in_every_wrapper(text, content):
    """xlam: bare / fenced / `[TOOL_CALLS]` / `<tool_call>` / after `</think>` arrays; other
    brackets in prose stay content; content is the output minus the call block."""
    out = parse("xlam", text)
    assert (out.content, calls(out)) == (content, [("a", {})])


def test_xlam_empty_arguments_do_not_leak_into_next_call_bug_br28():
    """BR28: after a call with `{}` arguments the next call streams its own arguments."""
    out = parse("xlam", '[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 42}}]')
    assert calls(out) == [("a", {}), ("b", {"x": 42})]


def test_phi4_mini_functools_array_streams():
    """phi4_mini_json: `functools[...]`; streamed too (vLLM has no streaming), batch == stream."""
    out = parse(
        "phi4_mini_json", 'functools[{"name": "a", "arguments": {"c": 1}}, {"name": "b", "arguments": {}}]'
    )
    assert (out.content, calls(out)) == (None, [("a", {"c": 1}), ("b", {})])


def test_longcat_uses_its_own_tags():
    """longcat: hermes with `<longcat_tool_call>`; a plain `<tool_call>` is content."""
    out = parse("longcat", 'x<longcat_tool_call>{"name": "a", "arguments": {}}</longcat_tool_call>')
    assert (out.content, calls(out)) == ("x", [("a", {})])
    assert parse("longcat", "<tool_call>{}").content == "<tool_call>{}"


def test_hunyuan_ignores_calls_inside_think_and_keeps_content_verbatim():
    """hunyuan_a13b: `<tool_calls>` inside `<think>` is text; content before the call keeps
    its trailing space; the `助手：` template artifact is dropped."""
    text = (
        "<think>maybe <tool_calls>[]</tool_calls></think>助手：Now. "
        '<tool_calls>[{"name": "a", "arguments": {}}]</tool_calls>'
    )
    out = parse("hunyuan_a13b", text)
    assert out.content == "<think>maybe <tool_calls>[]</tool_calls></think>Now. "
    assert calls(out) == [("a", {})]


def test_ernie45_strips_newlines_before_the_call():
    """ernie45: content before `<tool_call>` loses its trailing newlines only."""
    out = parse("ernie45", ' Hi \n\n<tool_call>\n{"name": "a", "arguments": {}}\n</tool_call>\n')
    assert (out.content, calls(out)) == (" Hi ", [("a", {})])


@pytest.mark.parametrize(
    "text",
    [
        'Ok.<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "m", "arguments": {"k": 1}}',
        'Ok.<|function_call|>{"name": "m", "arguments": {"k": 1}}</s>',
    ],
)
def test_gigachat3_v3_and_v31(text):
    """gigachat3: v3 `<|message_sep|>…function call<|role_sep|>` and v3.1 `<|function_call|>`;
    `</s>` dropped."""
    out = parse("gigachat3", text)
    assert (out.content, calls(out)) == ("Ok.", [("m", {"k": 1})])


def test_internlm_other_actions_stay_content():
    """`<|action_start|>` not followed by `<|plugin|>` (e.g. the interpreter action) is content."""
    text = "Run:<|action_start|>print(1)<|action_end|>"
    assert parse("internlm", text) == ParseResult(content=text)


@pytest.mark.parametrize(
    ("name", "tokens"),
    [
        ("granite4", ["<tool_call>", "</tool_call>"]),
        ("mistral", ["[TOOL_CALLS]", "[ARGS]"]),
        ("internlm", ["<|action_start|>", "<|plugin|>", "<|action_end|>"]),
        ("gigachat3", ["<|message_sep|>\n\n", "<|role_sep|>\n", "<|function_call|>", "</s>"]),
        ("llama3_json", ["<|python_tag|>", "<|python_start|>", "<|python_end|>"]),
    ],
)
def test_special_tokens_read_by_the_parser_are_marker_tokens(name, tokens):
    """Every special token a format reads (also those only its body handler sees, such as
    `</tool_call>` of granite4 or Mistral's `[ARGS]`) is in marker_token_ids, so the derender
    keeps its text instead of dropping it as an unrelated special token."""
    vocab = {text: 1000 + i for i, text in enumerate(tokens)} | {"<|im_end|>": 7}
    assert parsers.get_parser(None, name, vocab=vocab).marker_token_ids == frozenset(vocab.values()) - {7}


def _token_chunks(folder: str, text: str, keep: frozenset[int]) -> list[str]:
    """The output as a derender would stream it: one chunk per token of the real tokenizer,
    special tokens kept only when they are parser markers."""
    from parsers.cases import tokenizer

    tok = tokenizer(Path(folder))
    special = set(tok.all_special_ids) | {i for i, t in tok.added_tokens_decoder.items() if t.special}
    ids = [i for i in tok.encode(text, add_special_tokens=False) if i not in special or i in keep]
    chunks, prev = [], ""
    for n in range(1, len(ids) + 1):
        now = tok.decode(ids[:n], skip_special_tokens=False)
        if not now.endswith("\ufffd"):
            chunks.append(now[len(prev) :])
            prev = now
    return chunks


@pytest.mark.parametrize(
    ("folder", "name", "text", "expected"),
    [
        (
            "meta-llama--Llama-3.1-8B-Instruct",
            "llama3_json",
            '<|python_tag|>{"name": "get_weather", "parameters": {"city": "Münster"}}<|eom_id|>',
            [("get_weather", {"city": "Münster"})],
        ),
        (
            "mistralai--Mistral-Nemo-Instruct-2407",
            "mistral",
            'Sure.[TOOL_CALLS][{"name": "add", "arguments": {"a": 1.5, "b": [2]}, "id": "a1b2c3d4e"}]</s>',
            [("add", {"a": 1.5, "b": [2]})],
        ),
    ],
)
def test_real_tokenizer_token_stream(folder, name, text, expected):
    """With the real tokenizer (markers are single special tokens, other special tokens such as
    `<|eom_id|>`/`</s>` dropped by the derender), the token-by-token stream equals batch and
    finds the calls."""
    from parsers.cases import tokenizer

    path = model_dir(folder)
    parser = parsers.get_parser(None, name, vocab=tokenizer(Path(path)).get_vocab())
    assert parser.marker_token_ids
    chunks = _token_chunks(path, text, parser.marker_token_ids)
    ctx = ParseContext(tools=TOOLS)
    deltas, joined, _ = run_stream(parser, ctx, chunks, roundtrip=True)
    assert joined == parser.parse(ctx, None, "".join(chunks))
    assert calls(joined) == expected and call_delta_problems(deltas) == []
