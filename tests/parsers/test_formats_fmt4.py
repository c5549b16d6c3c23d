"""Formats with special-token delimiters: deepseek_v3/v31, kimi_k2, step3 and Harmony
(openai_gptoss + openai). Subtle behaviours from parsers.md sections 3 and 9, and the
streaming law (any chunking, state JSON round trips) for each of them."""

from __future__ import annotations

import json

import orjson
import pytest
from conftest import examples
from hypothesis import given, settings
from hypothesis import strategies as st

import parsers
from parsers.cases import SHARED, chunks, tokenizer
from parsers.harness import call_delta_problems, run_stream
from parsers.types import ParseContext, ToolCall

TOOLS = ({"type": "function", "function": {"name": "get_weather"}},)
CTX = ParseContext(tools=TOOLS)
V3_CALL = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n{args}\n```<｜tool▁call▁end｜>"
V31_CALL = "<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{args}<｜tool▁call▁end｜>"
KIMI_CALL = "<|tool_call_begin|>{header}<|tool_call_argument_begin|>{args}<|tool_call_end|>"
KIMI_SEC = "<|tool_calls_section_begin|>{calls}<|tool_calls_section_end|>"


def parse(reasoning, tool, text, ctx=CTX, vocab=None):
    return parsers.get_parser(reasoning, tool, vocab=vocab).parse(ctx, None, text)


def stream(reasoning, tool, pieces, ctx=CTX, vocab=None):
    return run_stream(parsers.get_parser(reasoning, tool, vocab=vocab), ctx, pieces, roundtrip=True)


def chars(text: str) -> list[str]:
    return list(text)


# -- deepseek_v3 / deepseek_v31 -------------------------------------------------------


def test_deepseek_v3_keeps_text_before_and_after_and_strips_the_fence():
    """v3 content = prefix + suffix; arguments verbatim without the ```json fence, also
    when streamed one character at a time."""
    calls = V3_CALL.format(name="get_weather", args='{"city":  "Paris"}')
    text = f"Let me check.<｜tool▁calls▁begin｜>{calls}<｜tool▁calls▁end｜>It is 30."
    want = parsers.ParseResult(
        content="Let me check.It is 30.", tool_calls=(ToolCall("get_weather", '{"city":  "Paris"}'),)
    )
    assert parse(None, "deepseek_v3", text) == want
    assert stream(None, "deepseek_v3", chars(text))[1] == want


def test_deepseek_v31_drops_text_after_block_and_keeps_pretty_json():
    """v31 content is only the text before the block; multi-line arguments stay verbatim."""
    args = '{\n  "x": [\n    1\n  ]\n}'
    text = "pre<｜tool▁calls▁begin｜>" + V31_CALL.format(name="foo", args=args) + "<｜tool▁calls▁end｜> post"
    result = parse(None, "deepseek_v31", text)
    assert result.content == "pre"
    assert result.tool_calls == (ToolCall("foo", args),)


def test_deepseek_call_markers_outside_a_block_are_content():
    """Without <｜tool▁calls▁begin｜> nothing is parsed (vLLM looks for the block token)."""
    text = "x " + V31_CALL.format(name="foo", args="{}")
    assert parse(None, "deepseek_v31", text) == parsers.ParseResult(content=text)


def test_deepseek_missing_call_end_is_closed_by_the_next_call_and_by_eos():
    """An unclosed call ends at the next call marker, and at the end of the stream."""
    text = (
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>a<｜tool▁sep｜>{"x": 1} '
        "<｜tool▁call▁begin｜>b<｜tool▁sep｜>{}"
    )
    result = parse(None, "deepseek_v31", text)
    assert [(c.name, c.arguments) for c in result.tool_calls] == [("a", '{"x": 1}'), ("b", "{}")]


# -- kimi_k2 ------------------------------------------------------------------------


def kimi(calls: str, before: str = "", after: str = "") -> str:
    return before + KIMI_SEC.format(calls=calls) + after


def test_kimi_native_header_is_the_id_and_content_before_is_verbatim():
    """The header functions.NAME:IDX is sent as the id verbatim; content keeps its trailing
    space; text after the section is dropped."""
    text = kimi(
        KIMI_CALL.format(header="functions.get_weather:7", args=' {"city": "Tokyo"} '), "Before. ", " After."
    )
    result = parse(None, "kimi_k2", text)
    assert result.content == "Before. "
    assert result.tool_calls == (ToolCall("get_weather", '{"city": "Tokyo"}', "functions.get_weather:7"),)
    deltas, joined, _ = stream(None, "kimi_k2", chars(text))
    assert joined == result
    first = [c for d in deltas for c in d.tool_calls if c.name]
    assert first[0].id == "functions.get_weather:7"


def test_kimi_sanitised_header_gets_an_id_continuing_the_history_count():
    """BR44: 'functionsexec5' names 'exec' (no raw markup in content); the minted id continues
    the conversation's tool-call count (history_tool_call_cnt + index)."""
    calls = KIMI_CALL.format(header="functionsexec5", args='{"command": "ls"}') + KIMI_CALL.format(
        header="functions_read_file_6", args="{}"
    )
    ctx = ParseContext(tools=TOOLS, history_tool_call_cnt=5)
    result = parse(None, "kimi_k2", kimi(calls), ctx)
    assert result.content is None
    assert result.tool_calls == (
        ToolCall("exec", '{"command": "ls"}', "functions.exec:5"),
        ToolCall("read_file", "{}", "functions.read_file:6"),
    )


def test_kimi_header_without_index_skips_the_call():
    """vLLM drops a call whose header has no ':<digits>' (functions.invalid.0)."""
    calls = KIMI_CALL.format(header="functions.invalid.0", args="{}") + KIMI_CALL.format(
        header="functions.valid:1", args='{"a": 1}'
    )
    result = parse(None, "kimi_k2", kimi(calls, "Help. "))
    assert [(c.name, c.id) for c in result.tool_calls] == [("valid", "functions.valid:1")]


def test_kimi_whitespace_only_content_before_section_is_dropped_but_kept_without_calls():
    """Whitespace-only content before a section is not content; without a section it is."""
    call = KIMI_CALL.format(header="functions.f:0", args="{}")
    assert parse(None, "kimi_k2", kimi(call, " \n")).content is None
    assert parse(None, "kimi_k2", " \n").content == " \n"


def test_kimi_singular_section_tokens_and_calls_after_the_section():
    """<|tool_call_section_begin|> is accepted; a call after the section end still counts."""
    call = KIMI_CALL.format(header="functions.f:0", args="{}")
    after = KIMI_CALL.format(header="functions.g:1", args="[]")
    text = f"<|tool_call_section_begin|>{call}<|tool_call_section_end|>noise{after}"
    assert [c.name for c in parse(None, "kimi_k2", text).tool_calls] == ["f", "g"]


def test_kimi_truncated_arguments_are_streamed_raw():
    """A stream ending inside the arguments keeps the partial raw JSON (sglang case)."""
    text = kimi(KIMI_CALL.format(header="functions.f:0", args='{"city": "Paris"'))
    text = text[: text.index("<|tool_call_end|>")]
    assert stream(None, "kimi_k2", chars(text))[1].tool_calls == (
        ToolCall("f", '{"city": "Paris"', "functions.f:0"),
    )


def test_kimi_required_tool_choice_mints_kimi_ids_for_guided_json():
    """tool_choice=required parses vLLM's guided JSON; ids still follow functions.NAME:N."""
    ctx = ParseContext(tools=TOOLS, tool_choice="required", history_tool_call_cnt=2)
    result = parse(None, "kimi_k2", '[{"name": "get_weather", "parameters": {"c": 1}}]', ctx)
    assert result.tool_calls == (ToolCall("get_weather", '{"c": 1}', "functions.get_weather:2"),)


# -- step3 --------------------------------------------------------------------------

STEP_TOOLS = (
    {
        "type": "function",
        "function": {
            "name": "get",
            "parameters": {
                "properties": {"n": {"type": "integer"}, "ok": {"type": "boolean"}, "s": {"type": "string"}}
            },
        },
    },
)


def step3(body: str) -> str:
    call = f"<｜tool_call_begin｜>function<｜tool_sep｜>{body}<｜tool_call_end｜>"
    return f"<｜tool_calls_begin｜>{call}<｜tool_calls_end｜>"


def test_step3_coerces_parameters_with_the_schema():
    """Values are stripped and coerced by the declared types; undeclared stay strings."""
    body = (
        '<steptml:invoke name="get"><steptml:parameter name="n"> 42 </steptml:parameter>'
        '<steptml:parameter name="ok">True</steptml:parameter>'
        '<steptml:parameter name="s"> x </steptml:parameter>'
        '<steptml:parameter name="z">7</steptml:parameter></steptml:invoke>'
    )
    ctx = ParseContext(tools=STEP_TOOLS)
    result = parse(None, "step3", "Sure." + step3(body), ctx)
    assert result.content == "Sure."
    assert json.loads(result.tool_calls[0].arguments) == {"n": 42, "ok": True, "s": "x", "z": "7"}
    assert stream(None, "step3", chars("Sure." + step3(body)), ctx)[1] == result


def test_step3_empty_call_and_unnamed_body():
    """No parameters → '{}'; a body without an invoke tag is given back as content."""
    assert parse(None, "step3", step3('<steptml:invoke name="refresh"></steptml:invoke>')).tool_calls == (
        ToolCall("refresh", "{}"),
    )
    assert parse(None, "step3", step3("junk")).content == "<｜tool_call_begin｜>function<｜tool_sep｜>junk"


# -- Harmony (gpt-oss) ----------------------------------------------------------------

GPT_OSS = SHARED / "models" / "openai--gpt-oss-20b"


@pytest.fixture(scope="module")
def oss():
    """The gpt-oss tokenizer and the composed Harmony parser with its marker ids."""
    from conftest import shared_path

    tok = tokenizer(shared_path("models", "openai--gpt-oss-20b"))
    return tok, parsers.get_parser("openai_gptoss", "openai", vocab=tok.get_vocab())


def run_oss(oss, text, ctx=CTX):
    tok, parser = oss
    batch = parser.parse(ctx, None, text)
    _, joined, _ = run_stream(parser, ctx, chunks(text, "gpt-oss"), roundtrip=True)
    assert joined == batch
    return batch


def test_harmony_marker_ids_are_the_harmony_specials(oss):
    """The derender keeps exactly the Harmony structure tokens as text."""
    tok, parser = oss
    names = {tok.convert_ids_to_tokens(i) for i in parser.marker_token_ids}
    assert names == {
        "<|start|>",
        "<|channel|>",
        "<|constrain|>",
        "<|message|>",
        "<|end|>",
        "<|call|>",
        "<|return|>",
    }


def test_harmony_channels_and_a_function_call(oss):
    """analysis → reasoning, commentary to=functions.F → call F with raw JSON arguments."""
    text = (
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.get_weather <|constrain|>json<|message|>{"location": "SF"}<|call|>'
    )
    assert run_oss(oss, text) == parsers.ParseResult(
        reasoning="Need weather.", tool_calls=(ToolCall("get_weather", '{"location": "SF"}'),)
    )


def test_harmony_recipient_in_role_header_and_builtin_tools_ignored(oss):
    """A recipient in the role header also makes a call; python/browser messages are dropped;
    messages of one kind are joined with a newline in both modes."""
    text = (
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
        "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{}<|call|>"
        "<|start|>assistant<|channel|>commentary to=python<|message|>print(1)<|call|>"
        "<|start|>assistant<|channel|>commentary<|message|>pre<|end|><|start|>assistant<|channel|>final<|message|>done"
    )
    result = run_oss(oss, text)
    assert result == parsers.ParseResult(
        content="pre\ndone", reasoning="a\nb", tool_calls=(ToolCall("f", "{}"),)
    )


def test_harmony_malformed_tail_is_content_and_truncation_keeps_kind(oss):
    """An unfinished header at the end is returned raw as content; a truncated analysis is
    reasoning."""
    assert run_oss(oss, "<|channel|>analysis<|message|>hmm") == parsers.ParseResult(reasoning="hmm")
    text = "<|channel|>final<|message|>x<|end|><|start|>assistant<|channel|>final {}"
    assert run_oss(oss, text).content == "x\n<|start|>assistant<|channel|>final {}"


def test_harmony_calls_only_with_an_active_tool_phase(oss):
    """tool_choice none (or no tools) hides calls; include_reasoning=False hides reasoning;
    reasoning is 'ended' from the start (vLLM GptOssReasoningParser)."""
    text = (
        "<|channel|>analysis<|message|>r<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.f<|message|>{}"
    )
    _, parser = oss
    assert run_oss(oss, text, ParseContext(tools=TOOLS, tool_choice="none")) == parsers.ParseResult(
        reasoning="r"
    )
    assert run_oss(oss, text, ParseContext(tools=TOOLS, include_reasoning=False)).reasoning is None
    assert parser.reasoning_ended(parser.start(CTX, None)) is True


#: Batch results of vLLM 0.33's HarmonyParser (openai_gptoss + openai) on these outputs, recorded
#: by running it by hand on the gpt-oss tokenizer (token ids from the same encode). Its
#: arguments are json.dumps re-serialised (ours: the raw text, compared after json.loads).
VLLM_HARMONY = [
    (
        "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather <|constrain|>json<|message|>{"location":  "SF"}<|call|>',
        None,
        "Need weather.",
        [("get_weather", '{"location": "SF"}')],
    ),
    (
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>analysis<|message|>b<|end|>"
        '<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{"x":1}<|call|>',
        None,
        "a\nb",
        [("get_weather", '{"x": 1}')],
    ),
    (
        "<|channel|>final<|message|>x<|end|><|start|>assistant<|channel|>final {}",
        "x\n<|start|>assistant<|channel|>final {}",
        None,
        [],
    ),
    (
        "<|channel|>final<|message|>x<|end|>stray<|start|>assistant<|channel|>final<|message|>y",
        "x\ny",
        None,
        [],
    ),
    (
        "<|channel|>commentary to=python<|message|>print(1)<|call|>"
        "<|start|>assistant<|channel|>final<|message|>done",
        "done",
        None,
        [],
    ),
    (
        "<|channel|>commentary<|message|>pre<|end|><|start|>assistant<|channel|>final<|message|>done<|return|>",
        "pre\ndone",
        None,
        [],
    ),
    (
        "<|channel|>analysis<|message|>think<|end|><|start|>assistant<|channel|>commentary"
        " to=functions.get_weather<|message|>{}<|call|><|start|>assistant<|channel|>commentary"
        ' to=functions.get_weather<|message|>{"a":2}<|call|>',
        None,
        "think",
        [("get_weather", "{}"), ("get_weather", '{"a": 2}')],
    ),
    ("<|channel|>analysis<|message|>", None, None, []),
    ("plain text no harmony", "plain text no harmony", None, []),
    (
        '<|channel|>analysis to=functions.get_weather<|message|>{"q":1}<|call|>',
        None,
        None,
        [("get_weather", '{"q": 1}')],
    ),
]


@pytest.mark.parametrize(("text", "content", "reasoning", "calls"), VLLM_HARMONY)
def test_harmony_matches_vllm_harmony_parser(oss, text, content, reasoning, calls):
    """Content, reasoning and calls equal vLLM's HarmonyParser batch result (messages joined
    with newlines, malformed tail as content, built-in tools ignored), in both modes."""
    result = run_oss(oss, text)
    assert (result.content, result.reasoning) == (content, reasoning)
    got = [(c.name, json.loads(c.arguments)) for c in result.tool_calls]
    assert got == [(name, json.loads(args)) for name, args in calls]


def test_gpt_oss_alias_is_registered():
    """The issue's name 'gpt-oss' is accepted as a reasoning parser name."""
    assert "gpt-oss" in parsers.REASONING_PARSERS and "openai_gptoss" in parsers.REASONING_PARSERS
    assert "openai" in parsers.TOOL_PARSERS


# -- streaming law for every format ----------------------------------------------------

word = st.text(alphabet='ab {}"<>|:`\n é', max_size=6)
args = st.dictionaries(st.text("xy", min_size=1, max_size=2), st.one_of(st.integers(), word), max_size=2)


@st.composite
def outputs(draw):
    """(reasoning, tool, text) of one format with random content and calls."""
    fmt = draw(st.sampled_from(["deepseek_v3", "deepseek_v31", "kimi_k2", "step3", "harmony"]))
    pre, post = draw(word), draw(word)
    calls = [json.dumps(draw(args)) for _ in range(draw(st.integers(0, 2)))]
    if fmt == "deepseek_v3":
        body = "".join(V3_CALL.format(name="f", args=a) for a in calls)
        return None, fmt, f"{pre}<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>{post}"
    if fmt == "deepseek_v31":
        body = "".join(V31_CALL.format(name="f", args=a) for a in calls)
        return None, fmt, f"{pre}<｜tool▁calls▁begin｜>{body}<｜tool▁calls▁end｜>{post}"
    if fmt == "kimi_k2":
        body = "".join(KIMI_CALL.format(header=f"functions.f:{i}", args=a) for i, a in enumerate(calls))
        return None, fmt, pre + KIMI_SEC.format(calls=body) + post
    if fmt == "step3":
        body = "".join(
            f'<｜tool_call_begin｜><steptml:invoke name="f"><steptml:parameter name="k">{a}'
            "</steptml:parameter></steptml:invoke><｜tool_call_end｜>"
            for a in calls
        )
        return None, fmt, f"{pre}<｜tool_calls_begin｜>{body}<｜tool_calls_end｜>{post}"
    msgs = [f"<|channel|>analysis<|message|>{pre}<|end|>"]
    msgs += [f"<|start|>assistant<|channel|>commentary to=functions.f<|message|>{a}<|call|>" for a in calls]
    msgs.append(f"<|start|>assistant<|channel|>final<|message|>{post}")
    return "openai_gptoss", "openai", "".join(msgs)


@settings(max_examples=examples(150), deadline=None)
@given(outputs(), st.data())
def test_any_chunking_with_state_round_trips_equals_batch(case, data):
    """Joined stream deltas == batch for random splits, with the state passed through JSON
    between chunks; call deltas follow the client rules; the state stays small."""
    reasoning, tool, text = case
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(text) - 1)), max_size=12)))
    pieces = [text[i:j] for i, j in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    parser = parsers.get_parser(reasoning, tool)
    deltas, joined, states = run_stream(parser, CTX, pieces, roundtrip=True)
    assert joined == parser.parse(CTX, None, text)
    assert call_delta_problems(deltas) == []
    assert all(len(orjson.dumps(s)) < 600 for s in states)


@pytest.mark.parametrize("tool", ["deepseek_v3", "deepseek_v31", "kimi_k2", "step3"])
def test_state_is_flat_over_long_content(tool):
    """10k characters of content do not grow the state (nothing is accumulated)."""
    parser = parsers.get_parser(None, tool)
    state = parser.start(CTX, None)
    sizes = []
    for _ in range(1000):
        state, _ = parser.feed(state, "0123456789")
        sizes.append(len(orjson.dumps(state)))
    assert max(sizes) == min(sizes)


def test_headers_are_bounded():
    """A 'header' that never ends does not grow the state: Harmony gives it (and the rest of
    the output) back as content, Kimi/DeepSeek skip the call; results are chunking-invariant."""
    text = "plain answer without any harmony structure " * 40
    deltas, joined, states = stream(
        "openai_gptoss", "openai", [text[i : i + 7] for i in range(0, len(text), 7)]
    )
    assert joined.content == text and max(len(orjson.dumps(s)) for s in states) < 1200
    junk = "x" * 2000
    kimi_text = kimi(
        KIMI_CALL.format(header=junk, args="{}") + KIMI_CALL.format(header="functions.f:1", args="{}")
    )
    _, joined, states = stream(None, "kimi_k2", [kimi_text[i : i + 5] for i in range(0, len(kimi_text), 5)])
    assert [c.name for c in joined.tool_calls] == ["f"] and max(len(orjson.dumps(s)) for s in states) < 1200
    v31 = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>" + junk + "<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
    assert parse(None, "deepseek_v31", v31).tool_calls == ()


def test_kimi_tool_choice_none_strips_the_markup():
    """tool_choice none: Kimi (a vLLM engine parser) still removes the section, drops calls."""
    text = kimi(KIMI_CALL.format(header="functions.f:0", args="{}"), "Hi. ", " tail")
    ctx = ParseContext(tools=TOOLS, tool_choice="none")
    assert parse(None, "kimi_k2", text, ctx) == parsers.ParseResult(content="Hi. ")
