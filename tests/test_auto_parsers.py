"""`--reasoning-parser auto` / `--tool-call-parser auto` and the no-flags server (issue 9 item 3).

The choice for every folder in ../shared/models equals the flags the README's parser table gives
for it (vLLM's documented flags); an unknown model gets no parser and a reason saying so; plain
`render-service serve` parses the embedded Qwen3 model's reasoning and tool calls over real HTTP
(the README's streaming example).
"""

from __future__ import annotations

import logging
import os

import pytest

from parsers.auto import ModelFacts, choose
from render_service.models import read_model_facts
from render_service.serving.cli import build_parser, settings_from_args
from tests.conftest import MODELS, shared_path

#: folder -> (reasoning parser, tool-call parser), as the README's parser table.
EXPECTED = {
    "Qwen--Qwen2.5-7B-Instruct": (None, "hermes"),
    "Qwen--Qwen2.5-VL-7B-Instruct": (None, None),  # its template never shows the model tools
    "Qwen--Qwen3-0.6B": ("qwen3", "hermes"),
    "Qwen--Qwen3-Coder-30B-A3B-Instruct": (None, "qwen3_coder"),
    "Qwen--Qwen3-VL-2B-Instruct": (None, "hermes"),
    "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B": ("deepseek_r1", None),  # template ignores tools
    "meta-llama--Llama-3.1-8B-Instruct": (None, "llama3_json"),
    "mistralai--Mistral-Nemo-Instruct-2407": (None, "mistral"),
    "openai--gpt-oss-20b": ("openai_gptoss", "openai"),
}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    for name in [n for n in os.environ if n.startswith("RENDER_SERVICE_")]:
        monkeypatch.delenv(name)


def test_every_model_folder_is_covered():
    shared_path("models")
    folders = {p.name for p in MODELS.iterdir() if (p / "config.json").is_file()}
    assert folders == set(EXPECTED)


@pytest.mark.parametrize("folder", sorted(EXPECTED))
def test_auto_choice_per_model_folder(folder):
    choice = choose(read_model_facts(str(shared_path("models", folder))))
    assert (choice.reasoning_parser, choice.tool_call_parser) == EXPECTED[folder]


def test_unknown_model_gets_no_parser_and_says_so():
    choice = choose(ModelFacts(("FooForCausalLM",), "foo", "{{ messages[0].content }}"))
    assert (choice.reasoning_parser, choice.tool_call_parser) == (None, None)
    assert "no reasoning parser" in choice.reason and "no tool-call parser" in choice.reason
    assert "model_type=foo" in choice.reason


def test_only_the_flags_given_as_auto_are_chosen():
    facts = read_model_facts(str(shared_path("models", "Qwen--Qwen3-0.6B")))
    assert (choose(facts, tools=False).reasoning_parser, choose(facts, tools=False).tool_call_parser) == (
        "qwen3",
        None,
    )
    args = build_parser().parse_args(
        ["serve", str(MODELS / "Qwen--Qwen3-0.6B"), "--tool-call-parser", "auto",
         "--reasoning-parser", "none"]
    )
    s = settings_from_args(args)
    assert (s.reasoning_parser, s.tool_call_parser, s.enable_auto_tool_choice) == (None, "hermes", True)


def test_a_model_folder_without_flags_keeps_vllm_defaults():
    """Only the embedded model defaults to auto; a named folder without flags parses nothing,
    as `vllm launch render MODEL` does."""
    folder = str(shared_path("models", "Qwen--Qwen3-0.6B"))
    s = settings_from_args(build_parser().parse_args(["serve", folder]))
    assert (s.reasoning_parser, s.tool_call_parser, s.enable_auto_tool_choice) == (None, None, False)


def test_the_choice_is_logged_at_start_up(caplog):
    with caplog.at_level(logging.INFO, logger="render_service.parsers"):
        settings_from_args(build_parser().parse_args(["serve"]))
    assert any("reasoning parser qwen3; tool-call parser hermes" in r.getMessage() for r in caplog.records)


CHAT = {
    "messages": [{"role": "user", "content": "Weather in Paris?"}],
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
}
FIRST = [151667, 198, 59604, 9104, 4362, 624, 151668, 271, 10061, 752, 1779, 624, 151657, 198, 4913, 606, 788]
REST = [330, 455, 69364, 497, 330, 16370, 788, 5212, 8926, 788, 330, 59604, 95642, 151658, 151645]


def test_no_flags_server_runs_the_readme_streaming_example(serve):
    """The README's streaming example against `render-service serve` with no flags, over HTTP."""
    s = settings_from_args(build_parser().parse_args(["serve"]))
    client = serve(reasoning_parser=s.reasoning_parser, tool_call_parser=s.tool_call_parser,
                   enable_auto_tool_choice=s.enable_auto_tool_choice)
    prompt = client.post("/v1/chat/completions/render", json=CHAT).json()["token_ids"]
    first = client.post("/v1/chat/completions/derender", json={
        "model": "Qwen/Qwen3-0.6B", "stream": True, "chat_request": CHAT, "prompt_token_ids": prompt,
        "generate_chunk": {"request_id": "chatcmpl-demo",
                           "choices": [{"index": 0, "token_ids": FIRST}]}}).json()
    delta = first["chunk"]["choices"][0]["delta"]
    assert (delta["content"], delta["reasoning"]) == ("\n\nLet me check.\n", "\nParis weather needed.\n")
    second = client.post("/v1/chat/completions/derender", json={
        "model": "Qwen/Qwen3-0.6B", "stream": True, "stream_state": first["stream_state"],
        "generate_chunk": {"request_id": "chatcmpl-demo",
                           "choices": [{"index": 0, "finish_reason": "stop", "token_ids": REST}]}}).json()
    choice = second["chunk"]["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    call = choice["delta"]["tool_calls"][0]["function"]
    assert (call["name"], call["arguments"]) == ("get_weather", '{"city": "Paris"}')
