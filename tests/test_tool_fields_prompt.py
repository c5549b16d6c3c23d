"""OpenAI-only tool fields stay out of the prompt (issue 9 item 5): a `strict: true` tool renders
the same token ids as the same tool without it (vLLM 0.33 prints `"strict": true` into the tool
JSON of Qwen's and Llama's templates; README, Deliberate differences), while `parse_context.tools`
keeps the tools as sent."""

from __future__ import annotations

import copy

import pytest
from render_helpers import bundle_for, settings_for

from render_service.render.chat import render_chat

TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
                   "additionalProperties": False}}}


def _body(strict: bool | None) -> dict:
    tool = copy.deepcopy(TOOL)
    if strict is not None:
        tool["function"]["strict"] = strict
    user = [{"role": "user", "content": "Weather in Paris?"}]
    return {"messages": user, "tools": [tool], "tool_choice": "none"}


@pytest.mark.parametrize("folder", ["Qwen--Qwen3-0.6B", "meta-llama--Llama-3.1-8B-Instruct"])
def test_strict_does_not_change_the_prompt(folder):
    bundle, settings = bundle_for(folder), settings_for(folder)
    plain = render_chat(bundle, settings, _body(None))
    for strict in (True, False):
        out = render_chat(bundle, settings, _body(strict))
        assert out["token_ids"] == plain["token_ids"]
        assert out["parse_context"]["tools"][0]["function"]["strict"] is strict  # kept as sent
    text = bundle.tokenizer.decode(plain["token_ids"])
    assert "get_weather" in text and "strict" not in text
