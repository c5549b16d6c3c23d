"""Every parser name vLLM 0.33 registers is ours too (no name silently missing).

The two tables are data copied from what vLLM 0.33 prints for
``ReasoningParserManager.list_registered()`` and ``ToolParserManager.list_registered()``
(re-check with ``~/vllm/bin/python -c "from vllm.reasoning import ReasoningParserManager as R;
print(R.list_registered())"``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

import parsers
from parsers import conformance
from parsers.cases import load
from parsers.types import ParseContext
from render_service.serving.cli import check_response_template

VLLM_033_REASONING = (
    "beam", "cohere_command3", "cohere_command4", "deepseek_r1", "deepseek_v3", "deepseek_v4",
    "deepseek_v41", "ernie45", "gemma4", "glm45", "glm47", "granite", "granite_thinking_parser",
    "hf", "holo2", "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "k2_horizon", "kimi_k2", "kimi_k3",
    "ling3", "mimo", "minicpmv", "minimax_m2", "minimax_m2_append_think", "minimax_m3", "mistral",
    "muse", "muse_glimmer", "musespark1x", "nemotron_v3", "olmo3", "openai_gptoss", "plamo3",
    "poolside_v1", "qwen3", "seed_oss", "step3", "step3p5", "step5",
)  # fmt: skip
VLLM_033_TOOL = (
    "apertus", "beam", "cohere_command3", "cohere_command4", "deepseek_v3", "deepseek_v31",
    "deepseek_v32", "deepseek_v4", "deepseek_v41", "dots", "ernie45", "functiongemma", "gemma4",
    "gigachat3", "glm45", "glm47", "granite", "granite-20b-fc", "granite4", "hermes", "hf",
    "hunyuan_a13b", "hy_v3", "hy_v4", "inkling", "internlm", "jamba", "k2_horizon", "kimi_k2",
    "kimi_k3", "lfm2", "ling3", "llama3_json", "llama4_json", "llama4_pythonic", "longcat", "mimo",
    "minicpm5", "minimax_m2", "minimax_m3", "mistral", "muse", "muse_glimmer", "musespark1x",
    "olmo3", "openai", "phi4_mini_json", "plamo3", "poolside_v1", "pythonic", "qwen3_coder",
    "qwen3_json", "qwen3_xml", "seed_oss", "step3", "step3p5", "step5", "xlam",
)  # fmt: skip

#: A minimal ``response_template`` (tokenizer_config.json metadata) for ``hf``/``beam``.
TEMPLATE_CONFIG = {
    "response_template": {
        "version": 1,
        "start_anchor": "<|im_start|>assistant\n",
        "fields": {
            "thinking": {"open": "<think>", "close": "</think>"},
            "content": {},
            "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "content": "json"},
        },
    }
}


def test_tables_have_the_counts_vllm_prints() -> None:
    assert (len(VLLM_033_REASONING), len(VLLM_033_TOOL)) == (42, 58)


@pytest.mark.parametrize("name", VLLM_033_REASONING)
def test_reasoning_name_is_registered_and_builds(name: str) -> None:
    assert name in parsers.REASONING_PARSERS
    parser = parsers.get_parser(name, None, tokenizer_config=TEMPLATE_CONFIG)
    assert parser.reasoning is not None and parser.tool is None


@pytest.mark.parametrize("name", VLLM_033_TOOL)
def test_tool_name_is_registered_and_builds(name: str) -> None:
    assert name in parsers.TOOL_PARSERS
    parser = parsers.get_parser(None, name, tokenizer_config=TEMPLATE_CONFIG)
    assert parser.tool is not None and parser.tool.kind in ("tool", "reasoning")


@pytest.mark.parametrize("name", sorted(parsers.TEMPLATE_PARSERS))
def test_template_parsers_need_the_metadata(name: str) -> None:
    with pytest.raises(ValueError, match="response_template"):
        parsers.get_parser(name, None)
    with pytest.raises(SystemExit, match="response_template"):
        check_response_template("../shared/models/Qwen--Qwen3-0.6B", (name, None))
    check_response_template("../shared/models/Qwen--Qwen3-0.6B", ("qwen3", "hermes"))  # others: no check


def test_hf_parses_by_the_template() -> None:
    tools = ({"type": "function", "function": {"name": "f"}},)
    ctx = ParseContext(tools=tools, enable_auto_tool_choice=True)
    parser = parsers.get_parser("hf", "hf", tokenizer_config=TEMPLATE_CONFIG)
    out = parser.parse(ctx, None, 'plan</think>ok<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>')
    assert (out.reasoning, out.content) == (None, "planok")  # starts in content; a stray </think> is dropped
    call = '<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call>'
    out = parser.parse(ctx, None, "<think>plan</think>ok" + call)
    assert (out.reasoning, out.content) == ("plan", "ok")
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("f", '{"a": 1}')]


#: SGLang's and the Rust gateways' names (the project's parser reference, sections 4 and 5).
SGLANG_AND_GATEWAY_REASONING = (
    "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41", "qwen3-thinking", "kimi", "gpt-oss",
    "minimax", "minimax-append-think", "minimax-m3", "nemotron_3", "hunyuan", "gigachat35",
    "response_template", "gpt_oss", "minimax_append_think", "nemotron3", "nemotron_nano",
)  # fmt: skip
SGLANG_AND_GATEWAY_TOOL = (
    "apertus2509", "deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4", "deepseekv41", "glm",
    "gpt-oss", "llama3", "qwen", "qwen25", "minimax-m2", "minimax-m3", "hunyuan", "nanbeige",
    "response_template", "deepseek", "glm4_moe", "glm47_moe", "kimik2", "llama",
    "deepseek_v3_1", "deepseek_v3_2", "deepseek-v4", "gemma-4", "harmony", "nemotron_nano", "phi4",
)  # fmt: skip


@pytest.mark.parametrize(("kind", "name"), [("reasoning", n) for n in SGLANG_AND_GATEWAY_REASONING]
                         + [("tool", n) for n in SGLANG_AND_GATEWAY_TOOL])  # fmt: skip
def test_alias_is_registered_and_builds(kind: str, name: str) -> None:
    names = parsers.REASONING_PARSERS if kind == "reasoning" else parsers.TOOL_PARSERS
    assert name in names
    pair = (name, None) if kind == "reasoning" else (None, name)
    assert parsers.get_parser(*pair, tokenizer_config=TEMPLATE_CONFIG) is not None


@pytest.mark.parametrize(("alias", "target"), sorted(parsers.SGLANG_TOOL_ALIASES.items()))
def test_sglang_tool_alias_is_its_target_with_unknown_tools_dropped(alias: str, target: str) -> None:
    spec = parsers.get_spec("tool", alias, tokenizer_config=TEMPLATE_CONFIG)
    base = parsers.get_spec("tool", target, tokenizer_config=TEMPLATE_CONFIG)
    assert spec is not None and base is not None
    assert spec.drop_unknown_tools and not base.drop_unknown_tools
    assert (spec.markers, spec.transitions) == (base.markers, base.transitions)


SERVED_SAMPLE = [("deepseek_v41", "gemma4"), ("qwen3-thinking", "qwen")]


@pytest.mark.parametrize(("reasoning", "tool"), SERVED_SAMPLE)
def test_server_starts_and_derenders_with_new_names(serve, reasoning: str, tool: str) -> None:
    client = serve(reasoning_parser=reasoning, tool_call_parser=tool, enable_auto_tool_choice=True)
    body = {
        "model": "Qwen/Qwen3-0.6B",
        "chat_request": {"messages": [{"role": "user", "content": "hi"}]},
        "generate_response": {
            "request_id": "chatcmpl-x",
            "choices": [{"index": 0, "finish_reason": "stop", "token_ids": [9707, 0, 151645]}],
        },
    }
    resp = client.post("/v1/chat/completions/derender", json=body)
    assert resp.status_code == 200, resp.text
    assert resp.json()["choices"][0]["message"]["role"] == "assistant"


NEW_FORMAT_CASES = Path(__file__).parent / "cases" / "vllm033_new_formats.jsonl"


def test_new_format_cases_pass_batch_and_streaming() -> None:
    """Cases of every format added for vLLM 0.33's full list (``python -m parsers.conformance``
    runs the same file), batch and streaming."""
    cases = load(NEW_FORMAT_CASES)
    passed, failed, lines = conformance.run(cases)
    assert (failed, lines) == (0, [])
    assert passed == 2 * len(cases) and len(cases) >= 26
