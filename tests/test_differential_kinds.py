"""Kinds of difference the differential harness (``python -m tools.differential``) found against
vLLM 0.33, each pinned with vLLM's answer for the same input (no vLLM needed here)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from render_helpers import bundle_for, settings_for

from render_service.derender import derender_chat
from render_service.errors import InvalidRequest
from render_service.render.chat import render_chat

QWEN25 = "Qwen--Qwen2.5-7B-Instruct"
CODER = "Qwen--Qwen3-Coder-30B-A3B-Instruct"
R1 = "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B"
MISTRAL = "mistralai--Mistral-Nemo-Instruct-2407"
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}}}}]
HI = [{"role": "user", "content": "hi"}]


def _render(folder: str, body: dict, **flags) -> dict:
    return render_chat(bundle_for(folder), settings_for(folder, **flags), body)


def test_greedy_with_several_choices_is_a_400():
    """vLLM: ``n must be 1 when using greedy sampling, got 2.`` (``SamplingParams``)."""
    with pytest.raises(InvalidRequest, match="n must be 1 when using greedy sampling, got 2"):
        _render(QWEN25, {"messages": HI, "n": 2, "temperature": 0})
    assert _render(QWEN25, {"messages": HI, "n": 2, "temperature": 0.7})["sampling_params"]["n"] == 2


def test_hidden_reasoning_ends_reasoning_without_a_reasoning_parser():
    """vLLM ``resolve_reasoning_ended``: ``include_reasoning: false`` is True for every model."""
    flags = {"tool_call_parser": "hermes", "enable_auto_tool_choice": True}
    assert _render(QWEN25, {"messages": HI, "include_reasoning": False}, **flags)["reasoning_ended"] is True
    assert _render(QWEN25, {"messages": HI}, **flags)["reasoning_ended"] is None


def test_response_format_is_sent_whole():
    """vLLM 0.33 sends the output constraint as a whole ``StructuredOutputsParams``, with tools
    and no tool-call tag and without tools (render goldens ``response_format_json_object``)."""
    body = {"messages": HI, "tools": TOOLS, "response_format": {"type": "json_object"}}
    so = _render(QWEN25, body, tool_call_parser="hermes", enable_auto_tool_choice=True)[
        "sampling_params"]["structured_outputs"]
    assert so["json_object"] is True and so["structural_tag"] is None and so["_backend"] is None
    assert _render(QWEN25, {k: v for k, v in body.items() if k != "tools"},
                   tool_call_parser="hermes")["sampling_params"]["structured_outputs"] == so


def test_harmony_json_response_format_goes_to_the_final_channel():
    so = _render("openai--gpt-oss-20b", {"messages": HI, "response_format": {"type": "json_object"}},
                 reasoning_parser="openai_gptoss", tool_call_parser="openai",
                 enable_auto_tool_choice=True, system_start_date="2026-01-01")[
        "sampling_params"]["structured_outputs"]
    fmt = json.loads(so["structural_tag"])["format"]
    assert [e["type"] for e in fmt["elements"]] == ["optional", "or"]
    begins = [t["begin"] for t in fmt["elements"][1]["elements"]]
    assert begins == ["<|channel|>final json<|message|>", "<|channel|>final <|constrain|>json<|message|>"]
    assert so["json_object"] is None


def _derender(folder: str, text: str, chat: dict, end: bool = True, **flags) -> dict:
    b = bundle_for(folder)
    ids = b.tokenizer.encode(text, add_special_tokens=False) if text else []
    if end:
        ids.append(b.tokenizer.eos_token_id)
    body = {"generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": ids}]},
            "chat_request": chat}
    return derender_chat(b, settings_for(folder, **flags), body)["choices"][0]["message"]


def test_empty_output_content_is_null_under_an_engine_tool_parser():
    """vLLM's engine adapters (qwen3_coder) answer ``content: null`` for EOS only."""
    msg = _derender(CODER, "", {"messages": HI, "tool_choice": "none", "tools": TOOLS},
                    tool_call_parser="qwen3_coder", enable_auto_tool_choice=True)
    assert msg["content"] is None and msg["reasoning"] is None


def test_empty_output_reasoning_is_empty_string_under_deepseek_r1():
    """vLLM's ``deepseek_r1`` gives an output without ``</think>`` as reasoning as it is."""
    msg = _derender(R1, "", {"messages": HI}, reasoning_parser="deepseek_r1")
    assert (msg["reasoning"], msg["content"]) == ("", None)


def test_engine_tool_formats_strip_markup_without_tools():
    """vLLM: no tools means ``tool_choice: none``, where its engine adapters still drop markup
    (measured: qwen3_coder -> ``content: null``; mistral ``[TOOL_CALLS]![INST]`` -> ``![INST]``);
    Mistral with tools and ``tool_choice: none`` gives the output back whole (recorded kind
    ``mistral_tool_calls_text_under_none``)."""
    coder = _derender(CODER, "<tool_call>\n<function=search>\n<parameter=city>\nParis\n</parameter>\n"
                      "</function>\n</tool_call>", {"messages": HI},
                      tool_call_parser="qwen3_coder", enable_auto_tool_choice=True)
    assert coder["content"] is None and "tool_calls" not in coder
    mistral = _derender(MISTRAL, "[TOOL_CALLS]![INST]", {"messages": HI},
                        end=False, tool_call_parser="mistral", enable_auto_tool_choice=True)
    assert mistral["content"] == "![INST]"
    with_tools = _derender(MISTRAL, "[TOOL_CALLS]![INST]", {"messages": HI, "tools": TOOLS,
                                                          "tool_choice": "none"},
                           end=False, tool_call_parser="mistral", enable_auto_tool_choice=True)
    assert with_tools["content"] == "[TOOL_CALLS]![INST]"
    # but an empty output under mistral has content "" (measured), as under the legacy parsers
    empty = _derender(MISTRAL, "", {"messages": HI}, tool_call_parser="mistral", enable_auto_tool_choice=True)
    assert empty["content"] == ""


# --- parser kinds, recorded on their own model folders -----------------------------------------
# ``python -m tools.differential.record --kinds`` wrote vLLM 0.33's batch answer and one-token
# stream of each case (``tests/data/vllm_derender_kinds.json``).

KINDS = json.loads((Path(__file__).parent / "data" / "vllm_derender_kinds.json").read_text())


def _flags(flags: list[str]) -> dict:
    out: dict = {"enable_auto_tool_choice": "--enable-auto-tool-choice" in flags}
    for flag, key in (("--reasoning-parser", "reasoning_parser"), ("--tool-call-parser", "tool_call_parser")):
        if flag in flags:
            out[key] = flags[flags.index(flag) + 1]
    return out


def _core(message: dict, finish: str | None) -> dict:
    """What a client reads: text, reasoning, calls (name, arguments), finish reason."""
    return {"content": message.get("content") or "", "reasoning": message.get("reasoning") or "",
            "calls": [(c["function"]["name"], c["function"]["arguments"])
                      for c in message.get("tool_calls") or []],
            "finish_reason": finish}


def _ours(case: dict) -> tuple[dict, dict]:
    """Our batch answer and one-token stream of the case, as :func:`_core`."""
    b, settings = bundle_for(case["model"]), settings_for(case["model"], **_flags(case["flags"]))
    choice = case["body"]["generate_response"]["choices"][0]
    batch = derender_chat(b, settings, case["body"])["choices"][0]
    base = {k: v for k, v in case["body"].items() if k != "generate_response"}
    text = {"content": "", "reasoning": ""}
    calls: dict[int, list] = {}
    state, finish = None, None
    ids = choice["token_ids"]
    for n, t in enumerate(ids):
        last = n == len(ids) - 1
        body = {**base, "stream": True, "generate_chunk": {"request_id": "k", "choices": [
            {"index": 0, "token_ids": [t], "finish_reason": choice["finish_reason"] if last else None}]}}
        if state is not None:
            body["stream_state"] = state
        out = derender_chat(b, settings, body)
        state = out["stream_state"]
        for c in out["chunk"]["choices"]:
            d = c.get("delta") or {}
            for k in text:
                text[k] += d.get(k) or ""
            for tc in d.get("tool_calls") or []:
                cur = calls.setdefault(tc["index"], ["", ""])
                cur[0] += (tc.get("function") or {}).get("name") or ""
                cur[1] += (tc.get("function") or {}).get("arguments") or ""
            finish = c.get("finish_reason") or finish
    stream = {**text, "calls": [tuple(v) for _, v in sorted(calls.items())], "finish_reason": finish}
    return _core(batch["message"], batch["finish_reason"]), stream


def _vllm(case: dict) -> tuple[dict, dict]:
    choice = case["response"]["choices"][0]
    s = case["stream"]
    stream = {"content": s["content"], "reasoning": s["reasoning"],
              "calls": [(c["function"]["name"], c["function"]["arguments"]) for c in s["tool_calls"]],
              "finish_reason": s["finish_reason"]}
    return _core(choice["message"], choice["finish_reason"]), stream


#: Cases where we answer as vLLM's batch and stream both do (they agree there).
AS_VLLM = {"qwen3_call_ends_unterminated_reasoning", "coder_stray_parameter_after_call_tool_choice_none",
           "harmony_length_cut_after_start", "harmony_length_cut_inside_next_header",
           "harmony_call_header_inside_analysis", "mistral_empty_output_with_tools",
           "llama_python_tag_text_without_call", "llama_python_tag_before_call"}
#: README "Deliberate differences": vLLM's batch and stream disagree; ours is one of them in both
#: modes. Its stream: qwen3_coder text after a call (vLLM's batch drops it, never releasing
#: content it deferred behind the call), DeepSeek-R1 ``<think>`` after reasoning text (vLLM's
#: batch drops the text before the first one).
AS_VLLM_STREAM = {"coder_text_after_call", "coder_stray_function_after_call_without_tools",
                  "r1_think_after_reasoning_text", "coder_bare_function_then_block_without_tools"}
#: ... its batch: Mistral under ``tool_choice: none`` (its stream drops the text after the marker).
#: and Mistral's repeated ``[TOOL_CALLS]`` (one marker; its stream keeps the text after the call).
AS_VLLM_BATCH: set[str] = {"mistral_tool_calls_text_under_none", "mistral_repeated_marker"}


@pytest.mark.parametrize("case", [c for c in KINDS if c["name"] in AS_VLLM | AS_VLLM_STREAM | AS_VLLM_BATCH],
                         ids=lambda c: c["name"])
def test_parser_kind_answers_as_vllm(case):
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert ours_stream == ours_batch
    if case["name"] in AS_VLLM:
        assert vllm_batch == vllm_stream  # the recorded answers agree ...
        assert ours_batch == vllm_batch  # ... and so do we
    else:
        assert vllm_batch != vllm_stream
        assert ours_batch == (vllm_stream if case["name"] in AS_VLLM_STREAM else vllm_batch)
    if case["name"].startswith(("coder_text", "coder_stray_function", "coder_bare_function")):
        assert vllm_batch["content"] == "x" and ours_batch["content"].startswith("xy")


def _case(name: str) -> dict:
    return next(c for c in KINDS if c["name"] == name)


def test_call_drafted_inside_reasoning_stays_reasoning():
    """README "Deliberate differences" (bug case BR25, verl-project/verl#4757): a call drafted
    inside reasoning is reasoning; vLLM ends reasoning at the first ``<tool_call>``."""
    case = _case("qwen3_draft_call_before_think_end")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, _ = _vllm(case)
    assert [n for n, _ in vllm_batch["calls"]] == ["A", "A"]  # vLLM: the draft and the real call
    assert ours_batch == ours_stream and ours_batch["calls"] == [("A", "{}")]
    assert "<tool_call>" in ours_batch["reasoning"] and ours_batch["reasoning"].endswith("then analyse\n")
    case = _case("qwen3_draft_call_reasoning_goes_on")  # no </think> at all, reasoning goes on
    ours_batch, ours_stream = _ours(case)
    vllm_batch, _ = _vllm(case)
    assert vllm_batch["reasoning"] == "plan " and [n for n, _ in vllm_batch["calls"]] == ["A"]
    assert ours_batch == ours_stream and ours_batch["calls"] == []
    assert ours_batch["reasoning"] == case["output_text"]


def test_harmony_lone_stop_token_and_repeated_start():
    """README "Deliberate differences" (gpt-oss): vLLM answers a lone ``<|return|>`` with the stop
    token's text and drops a first message whose header repeats ``<|start|>assistant``."""
    ours_batch, ours_stream = _ours(_case("harmony_lone_stop_token"))
    vllm_batch, vllm_stream = _vllm(_case("harmony_lone_stop_token"))
    assert vllm_batch["content"] == vllm_stream["content"] == "<|return|>"
    assert ours_batch == ours_stream and ours_batch["content"] == "" and ours_batch["calls"] == []
    ours_batch, ours_stream = _ours(_case("harmony_repeated_leading_start"))
    vllm_batch, _ = _vllm(_case("harmony_repeated_leading_start"))
    assert vllm_batch["calls"] == [("add", '{"a": 2}')]
    assert ours_batch == ours_stream and [a for _, a in ours_batch["calls"]] == ['{"a": 1}', '{"a": 2}']


def test_mistral_second_tool_calls_block_is_a_call():
    """README "Deliberate differences" (Mistral): vLLM reads only the first ``[TOOL_CALLS]``
    segment and drops the second call."""
    case = _case("mistral_second_tool_calls_block")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert [a for _, a in vllm_batch["calls"]] == ['{"a": 1}']
    assert ours_batch == ours_stream and [a for _, a in ours_batch["calls"]] == ['{"a": 1}', '{"a": 2}']


def test_mistral_tool_calls_text_under_none():
    """README "Deliberate differences" (vLLM's stream disagrees with its batch): under
    ``tool_choice: none`` with tools vLLM's Mistral batch gives the output back whole, its stream
    drops everything after ``[TOOL_CALLS]``; ours is its batch in both modes."""
    case = _case("mistral_tool_calls_text_under_none")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch["content"] == "[TOOL_CALLS]![INST]" and vllm_stream["content"] == ""
    assert ours_batch == ours_stream == vllm_batch


def test_auto_with_strict_tool_and_response_format_allows_calls_or_the_output():
    """vLLM 0.33 (``adjust_request`` with tools: ``OrFormat`` of the ``required`` calls tag and
    the output format; measured by the differential harness on gpt-oss, seed 20261201): under
    ``auto`` with a strict tool and a JSON ``response_format`` the engine may emit either."""
    strict = [{"type": "function", "function": {**TOOLS[0]["function"], "strict": True}}]
    base = {"messages": HI, "tools": strict}
    flags = {"reasoning_parser": "openai_gptoss", "tool_call_parser": "openai",
             "enable_auto_tool_choice": True, "system_start_date": "2026-01-01"}

    def tag(body: dict) -> dict:
        so = _render("openai--gpt-oss-20b", body, **flags)["sampling_params"]["structured_outputs"]
        return json.loads(so["structural_tag"])["format"]

    both = tag({**base, "tool_choice": "auto", "response_format": {"type": "json_object"}})
    assert both["type"] == "or"
    assert both["elements"][0] == tag({**base, "tool_choice": "required"})
    assert both["elements"][1] == tag({"messages": HI, "response_format": {"type": "json_object"}})


def test_mistral_keeps_special_token_text_inside_the_output():
    """vLLM 0.33's Mistral parser sets ``skip_special_tokens=False`` for every chat request: a
    ``</s>`` inside the output stays text (measured by the differential harness, seed 20261201:
    output ``</s>\\n[INST]\\n`` + EOS → content ``"</s>\\n[INST]\\n"``); the final stop token is
    still left out."""
    msg = _derender(MISTRAL, "</s>\n[INST]\n", {"messages": HI}, tool_call_parser="mistral",
                    enable_auto_tool_choice=True)
    assert msg["content"] == "</s>\n[INST]\n"


def _batch_answer(case: dict) -> dict:
    """Our batch derender of the case, with its model folder and flags."""
    b, settings = bundle_for(case["model"]), settings_for(case["model"], **_flags(case["flags"]))
    return derender_chat(b, settings, case["body"])


def _batch_message(case: dict) -> dict:
    return _batch_answer(case)["choices"][0]["message"]


@pytest.mark.parametrize("name", ["mistral_empty_output_with_tools", "mistral_call_dropped_without_tools",
                                  "mistral_repeated_marker"])
def test_mistral_batch_content_null_or_text_as_vllm(name):
    """vLLM 0.33's pre-v11 Mistral batch: content ``null`` for an empty output with tools under
    ``auto`` and after a call parsed without tools (dropped), the text before a call."""
    case = _case(name)
    assert _batch_message(case)["content"] == case["response"]["choices"][0]["message"]["content"]


def test_mistral_block_that_never_becomes_a_call_keeps_all_text():
    """README "Deliberate differences": a ``[TOOL_CALLS]`` block cut by ``length`` is content
    with the text before it; vLLM's batch loses the text before the marker, its stream the rest."""
    case = _case("mistral_length_cut_in_block")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch["content"] == '[{"name": "ad' and vllm_stream["content"] == "Ünï"
    assert ours_batch == ours_stream and ours_batch["content"] == 'Ünï[{"name": "ad'


def test_mistral_forced_choice_text_is_content_as_generated():
    """README "Deliberate differences": under a named choice an output that is not a call is
    content as generated; vLLM's batch strips it, its stream drops it."""
    case = _case("mistral_named_choice_text")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch["content"] == "world" and vllm_stream["content"] == ""
    assert ours_batch == ours_stream and ours_batch["content"] == " world\n"


# --- special-token text, qwen3_coder whitespace before a call, R1 empty content (round 19) ------

#: vLLM's batch and stream agree; ours too.
AS_VLLM_SPECIAL = {"hermes_special_token_text_kept", "hermes_special_token_text_kept_with_call",
                   "r1_special_token_text_kept", "coder_special_token_text_dropped",
                   "coder_blank_content_before_call", "r1_empty_content_after_think_end"}


@pytest.mark.parametrize("name", sorted(AS_VLLM_SPECIAL))
def test_special_token_text_and_blank_content_as_vllm(name):
    """README "Special tokens in a chat derender": vLLM keeps a special token's text unless one of
    its engine parsers lexes the output (Qwen2.5/hermes and R1 keep ``<|im_start|>``, Qwen3 and
    qwen3_coder drop it); whitespace-only content before a qwen3_coder call is dropped."""
    case = _case(name)
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch == vllm_stream and ours_batch == vllm_batch and ours_stream == ours_batch
    kept = "im_start" in vllm_batch["content"] + vllm_batch["reasoning"]
    assert kept == (name.startswith(("hermes", "r1_special")))


def test_qwen3_special_token_text_dropped_as_vllm_batch():
    """Qwen3 (the engine ``qwen3`` reasoning parser): vLLM's batch drops the special tokens'
    text, its stream keeps it (they disagree); ours is its batch in both modes."""
    case = _case("qwen3_special_token_text_dropped")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch["content"] == " world!" and "<|im_start|>" in vllm_stream["content"]
    assert ours_batch == ours_stream == vllm_batch


def test_coder_whitespace_around_content_before_call_is_vllm_stream():
    """README "Deliberate differences": vLLM's batch strips the content of an output with calls
    (``"42 42"``), its stream keeps the whitespace (``"\\n 42 42\\n"``); ours is its stream."""
    case = _case("coder_whitespace_around_content_before_call")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch["content"] == "42 42" and vllm_stream["content"] == "\n 42 42\n"
    assert ours_batch == ours_stream == vllm_stream


def test_r1_empty_content_after_think_end_is_null():
    """vLLM's legacy thinking parsers answer the text after ``</think>`` ``or None``."""
    case = _case("r1_empty_content_after_think_end")
    ours = _batch_message(case)
    theirs = case["response"]["choices"][0]["message"]
    assert theirs["content"] is None and ours["content"] is None
    assert ours["reasoning"] == theirs["reasoning"]


GPTOSS = "openai--gpt-oss-20b"


def test_harmony_first_word_of_the_first_header_is_its_recipient():
    """``openai_harmony`` reads the first word of a header before ``<|channel|>`` as the
    recipient (with or without ``to=``), and vLLM 0.33 treats any bare recipient as a function:
    measured by the differential harness (seed 20261201): ``Hello<|channel|>final<|message|>…``
    without tools → content null; ``🎉🎉<|channel|>commentary<|message|>ARGS<|call|>`` with tools
    → a call named ``🎉🎉`` whose arguments are the message text, ``finish_reason: tool_calls``."""
    flags = {"reasoning_parser": "openai_gptoss", "tool_call_parser": "openai",
             "enable_auto_tool_choice": True}
    msg = _derender(GPTOSS, 'Hello<|channel|>final<|message|>\t {"a": 1}', {"messages": HI}, **flags)
    assert msg["content"] is None and not msg.get("tool_calls")
    b = bundle_for(GPTOSS)
    ids = b.tokenizer.encode("🎉🎉<|channel|>commentary<|message|>{}<|call|>", add_special_tokens=False)
    body = {"generate_response": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "stop"}]},
        "chat_request": {"messages": HI, "tools": TOOLS}}
    choice = derender_chat(b, settings_for(GPTOSS, **flags), body)["choices"][0]
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in choice["message"]["tool_calls"]] \
        == [("🎉🎉", "{}")]
    assert choice["finish_reason"] == "tool_calls"
    plain = _derender(GPTOSS, "<|channel|>final<|message|>y", {"messages": HI}, **flags)
    assert plain["content"] == "y"


def test_llama_python_tag_is_text_unless_a_call_follows():
    """vLLM 0.33 keeps special-token text with a parser configured: ``<|python_tag|>`` without a
    call is content in its batch and stream; before a call it is dropped."""
    ours_batch, _ = _ours(_case("llama_python_tag_text_without_call"))
    assert ours_batch["content"] == "🎉🎉<|python_tag|><|python_tag|>" and not ours_batch["calls"]
    ours_batch, _ = _ours(_case("llama_python_tag_before_call"))
    assert ours_batch["content"] == "" and ours_batch["calls"] == [("add", '{"a": 1}')]


def test_llama_text_before_call_keeps_text_and_call():
    """README "Deliberate differences" (``llama3_json``, text before the first call): vLLM's
    batch drops the text (``""`` under a named choice), its stream drops the call; ours keeps
    both, batch and stream alike."""
    case = _case("llama_text_before_call_named")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch["content"] == "" and vllm_batch["calls"] == [("add", "{}")]
    assert vllm_stream["calls"] == [] and vllm_stream["content"] == case["output_text"]
    assert ours_batch == ours_stream
    assert ours_batch["content"] == "! 42" and ours_batch["calls"] == vllm_batch["calls"]


def test_llama_stream_keeps_empty_arguments_and_unseparated_call():
    """README "Deliberate differences" (``llama3_json`` streaming): vLLM's stream sends no ``{}``
    arguments and loses a call written right after another; its batch gives the output back
    as content. Ours: both calls with their arguments, batch and stream alike."""
    case = _case("llama_empty_arguments_unseparated_calls")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_stream["calls"] == [("add", "")]
    assert vllm_batch["calls"] == [] and vllm_batch["content"] == case["output_text"]
    assert ours_batch == ours_stream
    assert ours_batch["calls"] == [("add", "{}"), ("unknown_fn", '{"city": "Paris"}')]
    assert all(name in vllm_batch["content"] for name, _ in ours_batch["calls"])

# --- gpt-oss header cut inside a character, raw call arguments; Qwen3 thinking off (round 19) --


def test_harmony_length_cut_inside_a_header_character_keeps_u_fffd_as_vllm():
    """vLLM 0.33 gives a header that never completes back whole (``HarmonyParser.flush`` decodes
    its ids on ``HarmonyError``): a ``length`` cut inside a character keeps U+FFFD, batch and
    stream alike (elsewhere the partial character is dropped, as vLLM's detokenizer does)."""
    case = _case("harmony_length_cut_in_header_character")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch == vllm_stream and vllm_batch["content"].endswith("\ufffd")
    assert ours_batch == ours_stream == vllm_batch
    b = bundle_for(GPTOSS)  # inside a message the cut character (" \\xf0..." token) is dropped
    ids = b.tokenizer.encode("<|channel|>final<|message|>a 😶", add_special_tokens=False)[:-1]
    body = {"generate_response": {"request_id": "r", "choices": [
        {"index": 0, "token_ids": ids, "finish_reason": "length"}]}, "chat_request": {"messages": HI}}
    settings = settings_for(GPTOSS, **_flags(case["flags"]))
    assert derender_chat(b, settings, body)["choices"][0]["message"]["content"] == "a"


@pytest.mark.parametrize("name", ["harmony_text_arguments_keep_whitespace",
                                  "harmony_json_arguments_leading_space"])
def test_harmony_call_arguments_keep_their_whitespace(name):
    """vLLM streams a Harmony call's message text raw and returns non-JSON text raw in its batch
    (JSON is re-serialised there: the same value): whitespace around the arguments stays."""
    case = _case(name)
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert ours_batch == ours_stream and ours_stream["calls"] == vllm_stream["calls"]
    (_, ours_args), = ours_batch["calls"]
    (_, vllm_args), = vllm_batch["calls"]
    if name.startswith("harmony_json"):
        assert ours_args.startswith(" ") and json.loads(ours_args) == json.loads(vllm_args)
    else:
        assert vllm_batch == vllm_stream and ours_batch == vllm_batch and ours_args.startswith(" ")


def test_qwen3_thinking_off_keeps_special_token_text_as_vllm():
    """vLLM's ``qwen3`` parser lexes nothing when ``enable_thinking`` is false
    (``Qwen3Parser.extract_reasoning``): special tokens stay text, batch and stream."""
    case = _case("qwen3_thinking_off_special_token_text_kept")
    ours_batch, ours_stream = _ours(case)
    vllm_batch, vllm_stream = _vllm(case)
    assert vllm_batch == vllm_stream and "<|im_start|>" in vllm_batch["content"]
    assert ours_batch == ours_stream == vllm_batch


def test_harness_counts_an_argument_serialisation_split_of_vllm_as_deliberate():
    """The harness (``tools.differential.run.vllm_stream_disagrees``): vLLM's batch re-writes
    JSON arguments (``json.dumps``), its stream sends them raw; ours, raw in both modes, says the
    same value, so the batch case is deliberate; another value is not."""
    from tools.differential.run import vllm_stream_disagrees

    case = _case("harmony_json_arguments_leading_space")
    answer = _batch_answer(case)
    ours = answer["choices"][0]["message"]
    theirs, stream = case["response"], case["stream"]
    answer["model"] = theirs["model"]  # the served name (the harness serves both alike)
    assert vllm_stream_disagrees(answer, theirs, stream, {}, "derender batch")
    ours["tool_calls"][0]["function"]["arguments"] = '{"a": 2}'
    assert not vllm_stream_disagrees(answer, theirs, stream, {}, "derender batch")
