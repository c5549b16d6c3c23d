"""Kinds of difference the differential harness (``python -m tools.differential``) found against
vLLM 0.33, each pinned with vLLM's answer for the same input (no vLLM needed here)."""

from __future__ import annotations

import json

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


def test_response_format_with_tools_is_sent_whole():
    """vLLM (hermes, llama3_json, qwen3_coder, mistral): with tools and no tool-call tag the
    output constraint is a whole ``StructuredOutputsParams``."""
    body = {"messages": HI, "tools": TOOLS, "response_format": {"type": "json_object"}}
    so = _render(QWEN25, body, tool_call_parser="hermes", enable_auto_tool_choice=True)[
        "sampling_params"]["structured_outputs"]
    assert so["json_object"] is True and so["structural_tag"] is None and so["_backend"] is None
    assert "_backend" not in _render(QWEN25, {k: v for k, v in body.items() if k != "tools"},
                                     tool_call_parser="hermes")["sampling_params"]["structured_outputs"]


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
    (measured: qwen3_coder -> ``content: null``; mistral ``[TOOL_CALLS]![INST]`` -> ``![INST]``)."""
    coder = _derender(CODER, "<tool_call>\n<function=search>\n<parameter=city>\nParis\n</parameter>\n"
                      "</function>\n</tool_call>", {"messages": HI},
                      tool_call_parser="qwen3_coder", enable_auto_tool_choice=True)
    assert coder["content"] is None and "tool_calls" not in coder
    mistral = _derender(MISTRAL, "[TOOL_CALLS]![INST]", {"messages": HI, "tools": TOOLS,
                                                       "tool_choice": "none"},
                        end=False, tool_call_parser="mistral", enable_auto_tool_choice=True)
    assert mistral["content"] == "![INST]"
    # but an empty output under mistral has content "" (measured), as under the legacy parsers
    empty = _derender(MISTRAL, "", {"messages": HI}, tool_call_parser="mistral", enable_auto_tool_choice=True)
    assert empty["content"] == ""
