"""Record vLLM 0.33's reasoning-token counts (``usage.output_tokens_details.reasoning_tokens`` of
its Responses serving) for real model outputs, from vLLM's own parser classes.

Run in a venv with vllm==0.33.0 (not a project dependency), from the worktree root:

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 ~/vllm/bin/python tools/record_reasoning_token_goldens.py

vLLM's Responses serving builds one ``Parser`` per request (``ParserManager.get_parser`` + the
constructor with the request's ``tools`` and ``chat_template_kwargs``), gives it the prompt ids
(``set_prompt_token_ids``) and reports ``parser.count_reasoning_tokens(output ids)``; for
gpt-oss (harmony) it adds up ``HarmonyParser.process_chunk(ids).reasoning_token_count``. This
script does the same for each case of ``CASES`` (output text → ids with the model's tokenizer from
``../shared/models``, prompt rendered with the model's chat template) and writes
``tests/data/reasoning_token_goldens.json``: per case the folder, parser names, request kwargs,
prompt and output ids and vLLM's count.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer
from vllm.entrypoints.openai.responses.protocol import ResponsesRequest
from vllm.parser.parser_manager import ParserManager

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT.parent / "shared" / "models"
OUT = ROOT / "tests" / "data" / "reasoning_token_goldens.json"

QWEN3 = "Qwen--Qwen3-0.6B"
R1 = "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B"
GPT_OSS = "openai--gpt-oss-20b"
TOOL_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
THINK_TEXTS = {
    "think_answer": "<think>\nThe user asks about Paris. Weather needed.\n</think>\n\nSunny, 22°C.<|im_end|>",
    "think_tool": f"<think>\nI should call the tool.\n</think>\n\n{TOOL_CALL}<|im_end|>",
    "think_cut": "<think>\nA long thought that is cut short by the",
    "empty_think": "<think>\n\n</think>\n\nHi there!<|im_end|>",
    "no_markers": "Just an answer, no thinking.<|im_end|>",
    "end_only": "Implicit reasoning first.\n</think>\n\nThen the answer.<|im_end|>",
    "two_thinks": "<think>\nFirst.\n</think>\n\nMid <think>\nSecond 日本語.\n</think>\n\nEnd.<|im_end|>",
    "unicode": "<think>\n日本語で答える 😀\n</think>\n\n東京は晴れ 👩‍👩‍👧<|im_end|>",
}
R1_TEXTS = {
    "prefilled": "Okay, the user wants the weather in Paris.\n</think>\n\nSunny.<｜end▁of▁sentence｜>",
    "explicit_start": "<think>\nOkay, thinking.\n</think>\n\nSunny.<｜end▁of▁sentence｜>",
    "cut": "Okay, the user wants the weather and I am",
}
HARMONY_TEXTS = {
    "analysis_final": "<|channel|>analysis<|message|>Simple question.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Sunny, 22°C in Paris.<|return|>",
    "call": "<|channel|>analysis<|message|>Need the weather tool.<|end|>"
    "<|start|>assistant<|channel|>commentary"
    ' to=functions.get_weather <|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    "preamble_call": "<|channel|>analysis<|message|>Use the tool.<|end|>"
    "<|start|>assistant<|channel|>commentary"
    "<|message|>Let me look that up.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather "
    '<|constrain|>json<|message|>{"city": "Paris"}<|call|>',
    "recipient_in_role": "<|channel|>analysis<|message|>Think.<|end|>"
    "<|start|>assistant to=functions.get_weather"
    '<|channel|>commentary json<|message|>{"city": "東京"}<|call|>',
    "cut": "<|channel|>analysis<|message|>I'm thinking about the weather in",
    "final_only": "<|channel|>final<|message|>Hello!<|return|>",
}

#: vLLM parser-engine formats with ``<think>``/``</think>`` markers (run over Qwen3's vocabulary).
ENGINE_THINK = [
    "mimo",
    "nemotron_v3",
    "kimi_k2",
    "minimax_m2",
    "step3p5",
    "granite_thinking_parser",
    "deepseek_v4",
    "glm45",
    "glm47",
    "ling3",
]
#: (case id prefix, folder, reasoning parser, tool parser, chat_template_kwargs, texts)
GROUPS: list[tuple[str, str, str, str | None, dict[str, Any], dict[str, str]]] = [
    ("qwen3", QWEN3, "qwen3", "hermes", {}, THINK_TEXTS),
    (
        "qwen3_nothink",
        QWEN3,
        "qwen3",
        "hermes",
        {"enable_thinking": False},
        {k: THINK_TEXTS[k] for k in ("no_markers", "think_answer", "end_only")},
    ),
    ("deepseek_r1", R1, "deepseek_r1", None, {}, R1_TEXTS),
    ("deepseek_r1_qwen", QWEN3, "deepseek_r1", None, {}, THINK_TEXTS),
    ("step3", QWEN3, "step3", None, {}, THINK_TEXTS),
    ("deepseek_v3_thinking", QWEN3, "deepseek_v3", None, {"thinking": True}, THINK_TEXTS),
    (
        "deepseek_v3",
        QWEN3,
        "deepseek_v3",
        None,
        {},
        {k: THINK_TEXTS[k] for k in ("think_answer", "no_markers")},
    ),
    ("hy_v4", QWEN3, "hy_v4", None, {}, THINK_TEXTS),
    ("harmony", GPT_OSS, "openai_gptoss", "openai", {}, HARMONY_TEXTS),
    *(
        (f"{name}{suffix}", QWEN3, name, None, kwargs, THINK_TEXTS)
        for name in ENGINE_THINK
        for suffix, kwargs in (("", {}), ("_nothink", {"enable_thinking": False}))
    ),
]


def _prompt_ids(tok: Any, folder: str, kwargs: dict[str, Any]) -> list[int]:
    if folder == GPT_OSS:
        return []  # the harmony count does not read the prompt
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    ids = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True, **kwargs)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


def _count(
    folder: str,
    tok: Any,
    reasoning: str,
    tool: str | None,
    kwargs: dict[str, Any],
    prompt: list[int],
    ids: list[int],
) -> int:
    cls = ParserManager.get_parser(
        reasoning_parser_name=reasoning,
        tool_parser_name=tool,
        enable_auto_tools=tool is not None,
        is_harmony=folder == GPT_OSS,
    )
    request = ResponsesRequest(model="m", input="Weather in Paris?", tools=[WEATHER])
    parser = cls(tok, request.tools, chat_template_kwargs=kwargs, model_config=None)
    if folder == GPT_OSS:  # HarmonyContext.append_output: per engine output, one token each
        return sum(parser.process_chunk([i]).reasoning_token_count for i in ids)
    if prompt:
        parser.set_prompt_token_ids(prompt)
    parser.parse(tok.decode(ids), request, enable_auto_tools=tool is not None, model_output_token_ids=ids)
    return int(parser.count_reasoning_tokens(ids))


def main() -> None:
    cases = []
    for prefix, folder, reasoning, tool, kwargs, texts in GROUPS:
        tok = AutoTokenizer.from_pretrained(str(MODELS / folder))
        prompt = _prompt_ids(tok, folder, kwargs)
        for key, text in texts.items():
            ids = tok.encode(text, add_special_tokens=False)
            cases.append(
                {
                    "id": f"{prefix}/{key}",
                    "model": folder,
                    "reasoning_parser": reasoning,
                    "tool_call_parser": tool,
                    "chat_template_kwargs": kwargs,
                    "text": text,
                    "finish_reason": "length" if "cut" in key else "stop",
                    "prompt_token_ids": prompt,
                    "token_ids": ids,
                    "reasoning_tokens": _count(folder, tok, reasoning, tool, kwargs, prompt, ids),
                }
            )
            print(cases[-1]["id"], len(ids), cases[-1]["reasoning_tokens"])
    OUT.write_text(json.dumps({"vllm": "0.33.0", "cases": cases}, ensure_ascii=False, indent=1) + "\n")


if __name__ == "__main__":
    main()
