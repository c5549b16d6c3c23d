"""Subtle behaviours of the reasoning families added by fmt1 (parsers.md sections 2 and 9),
each checked in batch and in a one-character-per-chunk stream with state JSON round trips."""

from __future__ import annotations

import pytest

import parsers
from parsers.harness import run_stream
from parsers.types import ParseContext, ParseResult


def both(name: str, text: str, **kwargs) -> ParseResult:
    """Batch result, asserted equal to the char-by-char stream with orjson round trips."""
    p = parsers.get_parser(name, None)
    ctx = ParseContext(chat_template_kwargs=kwargs)
    batch = p.parse(ctx, None, text)
    _, streamed, _ = run_stream(p, ctx, list(text), roundtrip=True)
    assert streamed == batch
    return batch


def rc(result: ParseResult) -> tuple[str | None, str | None]:
    return result.reasoning, result.content


def ended(name: str, text: str, **kwargs) -> bool | None:
    p = parsers.get_parser(name, None)
    state, _ = p.feed(p.start(ParseContext(chat_template_kwargs=kwargs), None), text)
    return p.reasoning_ended(state)


def test_vllm_aliases_are_registered():
    """glm47 (same vLLM class as glm45) and step5 (DeepSeekR1ReasoningParser) are accepted names."""
    for alias, target in (("glm47", "glm45"), ("step5", "deepseek_r1")):
        assert alias in parsers.REASONING_PARSERS
        assert parsers.get_spec("reasoning", alias) is parsers.get_spec("reasoning", target)


@pytest.mark.parametrize(
    ("name", "kwargs", "expected"),
    [
        ("deepseek_v3", {}, (None, "r</think>c")),
        ("deepseek_v3", {"thinking": True}, ("r", "c")),
        ("deepseek_v3", {"enable_thinking": True}, ("r", "c")),
        ("holo2", {}, ("r", "c")),
        ("holo2", {"thinking": False}, (None, "r</think>c")),
        ("holo2", {"thinking": False, "enable_thinking": True}, ("r", "c")),
        ("glm45", {"thinking": False}, (None, "r</think>c")),
        ("glm45", {"enable_thinking": False}, (None, "r</think>c")),
        ("kimi_k2", {"thinking": False}, (None, "r</think>c")),
        ("kimi_k2", {}, ("r", "c")),
        ("hy_v3", {}, (None, "r</think>c")),
        ("hy_v3", {"reasoning_effort": "no_think"}, (None, "r</think>c")),
        ("hy_v3", {"reasoning_effort": "high"}, ("r", "c")),
        ("step3p5", {"enable_thinking": False}, ("r", "c")),
        ("seed_oss", {"enable_thinking": False}, (None, "rc")),
    ],
)
def test_thinking_switches(name, kwargs, expected):
    """thinking/enable_thinking/reasoning_effort defaults per family: off means identity (markers
    kept as content) for the delegating parsers; step3p5 ignores enable_thinking; seed_oss off is
    qwen3's content mode (stray end marker dropped)."""
    text = "r</seed:think>c" if name == "seed_oss" else "r</think>c"
    assert rc(both(name, text, **kwargs)) == expected


@pytest.mark.parametrize("name", ["glm45", "kimi_k2", "minimax_m2", "step3p5", "nemotron_v3", "mistral"])
def test_trailing_reasoning_whitespace_is_dropped(name):
    """Engine parsers with strip_trailing_reasoning_whitespace drop whitespace before the end
    marker but keep inner whitespace, for any chunking."""
    start = "[THINK]" if name == "mistral" else ""
    end = "[/THINK]" if name == "mistral" else "</think>"
    assert rc(both(name, f"{start}a \n b \n\n{end}c")) == ("a \n b", "c")
    assert rc(both(name, f"{start}a  ")) == ("a", None)


@pytest.mark.parametrize("name", ["qwen3", "seed_oss", "olmo3", "deepseek_r1"])
def test_trailing_reasoning_whitespace_is_kept(name):
    """qwen3-style and legacy parsers keep the reasoning's trailing whitespace."""
    end = "</seed:think>" if name == "seed_oss" else "</think>"
    assert rc(both(name, f"a \n{end}c")) == ("a \n", "c")


@pytest.mark.parametrize(
    ("name", "start", "end"),
    [
        ("glm45", "<tool_call>", "</tool_call>"),
        ("kimi_k2", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
        ("minimax_m2", "<minimax:tool_call>", "</minimax:tool_call>"),
        ("seed_oss", "<seed:tool_call>", "</seed:tool_call>"),
        ("step3p5", "<tool_call>", "</tool_call>"),
        ("nemotron_v3", "<tool_call>", "</tool_call>"),
    ],
)
def test_tool_start_ends_reasoning_unless_drafted(name, start, end):
    """A tool-call start ends reasoning and is handed on as content; a call followed by more
    reasoning or the end marker was a draft and stays reasoning (BR25 for every family)."""
    think_end = "</seed:think>" if name == "seed_oss" else "</think>"
    call = f"{start}x{end}"
    assert rc(both(name, f"r{call}")) == ("r", call)
    assert rc(both(name, f"r\n{call}\nmore{think_end}ans")) == (f"r\n{call}\nmore", "ans")


def test_glm45_reopens_reasoning_and_drops_stray_end():
    """GLM: <think> in content opens reasoning again; a stray </think> in content is dropped."""
    assert rc(both("glm45", "a</think>b<think>c</think>d</think>e")) == ("ac", "bde")


def test_kimi_k2_tool_section_and_ended_flag():
    """Kimi K2: the section start ends reasoning (vLLM case tool_section_ends_reasoning); without
    tags everything is reasoning and reasoning has not ended."""
    out = "some reasoning<|tool_calls_section_begin|>tool call data"
    assert rc(both("kimi_k2", out)) == ("some reasoning", "<|tool_calls_section_begin|>tool call data")
    assert ended("kimi_k2", "implicit") is False and ended("kimi_k2", "r</think>") is True


def test_minimax_m2_append_think_prepends_once_and_for_empty_output():
    """append_think: content is '<think>' + output, reasoning null, also for an empty output;
    reasoning counts as ended only after </think>."""
    assert rc(both("minimax_m2_append_think", "r</think>c")) == (None, "<think>r</think>c")
    assert rc(both("minimax_m2_append_think", "")) == (None, "<think>")
    assert ended("minimax_m2_append_think", "r") is False
    assert ended("minimax_m2_append_think", "r</think>c") is True


def test_mistral_starts_in_content_and_accepts_both_marker_pairs():
    """Mistral: no [THINK] → all content; [THINK] never closed → rest is reasoning; v11 text
    markers work too; stray [/THINK] dropped; [TOOL_CALLS] ends reasoning and stays content."""
    assert rc(both("mistral", "plain")) == (None, "plain")
    assert rc(both("mistral", "a[THINK]r")) == ("r", "a")
    assert rc(both("mistral", "<think>r</think>c")) == ("r", "c")
    assert rc(both("mistral", "[/THINK]c")) == (None, "c")
    assert rc(both("mistral", "[THINK]r[TOOL_CALLS]f[ARGS]{}")) == ("r", "[TOOL_CALLS]f[ARGS]{}")


def test_granite_phrases_split_across_chunks():
    """Granite: 'Here's' and 'Here is' phrases; the thought phrase counts only at the start
    (vLLM streaming); no phrase → all content (partial phrases held back per character)."""
    assert rc(both("granite", "Here's my thought process:r Here is my response:c")) == ("r ", "c")
    assert rc(both("granite", "\nHere is my thought process:r")) == ("r", "\n")
    quoted = "He said Here is my thought process:r Here is my response:c"
    assert rc(both("granite", quoted)) == (None, quoted)
    assert rc(both("granite", "Here we go: no phrase")) == (None, "Here we go: no phrase")


def test_hunyuan_a13b_wrappers_and_fast_answer():
    """Hunyuan-A13B: think/answer wrappers with their newlines are removed; the answer marker
    without its leading newline works; text without <think> is content."""
    assert rc(both("hunyuan_a13b", "<think>\nr\n</think>\n<answer>\nc\n</answer>")) == ("r", "c")
    assert rc(both("hunyuan_a13b", "<think>\nr</think>\n<answer>\nc")) == ("r", "c")
    assert rc(both("hunyuan_a13b", "<think>\n\n</think>\n<answer>\nc")) == (None, "c")
    assert rc(both("hunyuan_a13b", "just content")) == (None, "just content")


def test_ernie45_response_wrapper_removed():
    """ERNIE 4.5: whitespace after </think> and the <response> wrapper are removed; text after
    </response> that is not whitespace is still content."""
    assert rc(both("ernie45", "abc\n</think>\n\n<response>\ndef\n</response>\n")) == ("abc\n", "\ndef\n")
    assert rc(both("ernie45", "abc</think>\ndef")) == ("abc", "def")
    assert rc(both("ernie45", "a</think><response>b</response> tail")) == ("a", "btail")


def test_olmo3_whitespace_preserved_and_no_end_is_reasoning():
    """Olmo 3: text markers, whitespace kept on both sides; no </think> → reasoning (streaming
    semantics in both modes)."""
    assert rc(both("olmo3", "<think>\n</think>\n\nx")) == ("\n", "\n\nx")
    assert rc(both("olmo3", "still thinking")) == ("still thinking", None)


def test_step3_only_first_end_counts():
    """Step-3: reasoning up to the first </think>; later markers are content."""
    assert rc(both("step3", "r</think>c</think>d")) == ("r", "c</think>d")


def test_gemma4_channels_thought_prefix_and_bare_close():
    """Gemma 4: starts in content; <|channel> opens reasoning and its 'thought\\n' prefix is
    stripped; an output starting with 'thought\\n' is a channel without opener; a bare
    <channel|> in content is dropped; <|tool_call> ends reasoning and stays content."""
    assert rc(both("gemma4", "<|channel>thought\nr<channel|>c")) == ("r", "c")
    assert rc(both("gemma4", "<|channel>thousand<channel|>c")) == ("thousand", "c")
    assert rc(both("gemma4", "thought\nr<channel|>c")) == ("r", "c")
    assert rc(both("gemma4", "thoughtful answer")) == (None, "thoughtful answer")
    assert rc(both("gemma4", "Before<channel|>after")) == (None, "Beforeafter")
    assert rc(both("gemma4", "<|channel>r<|tool_call>call:f{}")) == ("r", "<|tool_call>call:f{}")
    assert ended("gemma4", "<|channel>r") is False and ended("gemma4", "c") is True


def test_gemma4_prompt_inside_open_channel_starts_in_reasoning():
    """A prompt ending inside <|channel> (after a tool response) starts the output in reasoning;
    a prompt whose channel was closed starts in content."""
    vocab = {"<|channel>": 10, "<channel|>": 11, "<|turn>": 12, "<|tool_response>": 13, "<|tool_call>": 14}
    p = parsers.get_parser("gemma4", None, vocab=vocab)
    ctx = ParseContext()
    assert rc(p.parse(ctx, [12, 5, 13, 6, 10], "thought\nr<channel|>c")) == ("r", "c")
    assert rc(p.parse(ctx, [12, 10, 5, 11, 12], "c")) == (None, "c")


def test_glm45_prompt_scan_stops_at_turn_boundary():
    """GLM: a </think> of the current turn (thinking closed by the template) starts in content;
    one from an earlier turn, behind a role token, does not."""
    vocab = {"<think>": 1, "</think>": 2, "<|user|>": 3, "<|assistant|>": 4}
    p = parsers.get_parser("glm45", None, vocab=vocab)
    ctx = ParseContext()
    assert rc(p.parse(ctx, [4, 1, 2], "answer")) == (None, "answer")
    assert rc(p.parse(ctx, [4, 1, 9, 2, 3, 9, 4], "r</think>c")) == ("r", "c")


def test_nemotron_v3_force_nonempty_content_swaps():
    """nemotron_v3 with force_nonempty_content: reasoning becomes the content when nothing but
    whitespace follows </think> (or there is no </think>); real content keeps the split."""
    force = {"force_nonempty_content": True}
    assert rc(both("nemotron_v3", "r</think>  ", **force)) == (None, "r")
    assert rc(both("nemotron_v3", "only reasoning", **force)) == (None, "only reasoning")
    assert rc(both("nemotron_v3", "r</think>\nc", **force)) == ("r", "c")
    assert rc(both("nemotron_v3", "r</think>c")) == ("r", "c")


def test_include_reasoning_false_hides_reasoning_of_new_families():
    """include_reasoning=False drops reasoning but keeps content for the new families."""
    p = parsers.get_parser("kimi_k2", None)
    result = p.parse(ParseContext(include_reasoning=False), None, "r</think>c")
    assert rc(result) == (None, "c")


def test_br11_kimi_k2_think_tokens_without_spaces():
    """BR11 (right value): once the detokenizer gives '<think>ok</think>1' (no spaces around the
    added tokens), kimi_k2 yields reasoning 'ok' and content '1'."""
    assert rc(both("kimi_k2", "<think>ok</think>1")) == ("ok", "1")


def test_reasoning_ended_before_any_output():
    """reasoning_ended right after start (what /render reports): gemma4 waits for a channel only
    with enable_thinking; hunyuan_a13b's reasoning ends only inside the answer; identity modes
    have ended; thinking parsers have not."""
    assert ended("gemma4", "") is True and ended("gemma4", "", enable_thinking=True) is False
    assert ended("gemma4", "answer", enable_thinking=True) is True
    assert ended("hunyuan_a13b", "") is False
    assert ended("hunyuan_a13b", "<think>\nr\n</think>\n<answer>\nc") is True
    assert ended("deepseek_v3", "") is True and ended("holo2", "") is False
    assert ended("mistral", "") is True and ended("mistral", "[THINK]r") is False


def _mini(**extra) -> parsers.Parser:
    spec = parsers.FormatSpec(
        name="mini",
        kind="reasoning",
        markers={"END": "</think>"},
        modes={"R": "reasoning", "C": "content"},
        transitions={("R", "END"): parsers.Transition("C")},
        initial_mode="R",
        reasoning_modes=frozenset({"R"}),
        **extra,
    )
    return parsers.Parser(spec, None)


def test_engine_strip_reasoning_tail_holds_whitespace_in_state():
    """strip_reasoning_tail: trailing reasoning whitespace waits in state['r']['ws'] (sent when
    more reasoning follows, dropped when content follows or the stream ends)."""
    p = _mini(strip_reasoning_tail=True)
    state = p.start(ParseContext(), None)
    state, out = p.feed(state, "a \n")
    assert [d.reasoning for d in out] == ["a"] and state["r"]["ws"] == " \n"
    state, out = p.feed(state, "b  ")
    assert [d.reasoning for d in out] == [" \nb"]
    state, out = p.feed(state, "</think>c")
    assert [(d.reasoning, d.content) for d in out] == [(None, "c")] and state["r"]["ws"] == ""
    _, out = p.finish(p.feed(p.start(ParseContext(), None), "x \t")[0])
    assert out == []


def test_engine_preamble_goes_first_once():
    """preamble: sent as content once, before the first text, and at finish for empty output."""
    p = _mini(preamble="<p>")
    state = p.start(ParseContext(), None)
    state, first = p.feed(state, "r")
    state, second = p.feed(state, "</think>c")
    assert [(d.reasoning, d.content) for d in first + second] == [("r", "<p>"), (None, "c")]
    _, out = p.finish(p.start(ParseContext(), None))
    assert [d.content for d in out] == ["<p>"]
