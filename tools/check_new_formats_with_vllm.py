"""Compare the tool calls of our new-format cases with vLLM 0.33's own tool parsers.

Run in a venv with vllm==0.33.0 (not a project dependency), from the worktree root:

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 ~/vllm/bin/python tools/check_new_formats_with_vllm.py

For every tool case of ``tests/parsers/cases/vllm033_new_formats.jsonl`` named by a vLLM parser
(the SGLang/Dynamo alias cases are skipped) it runs vLLM's ``extract_tool_calls`` on the model
output with the Qwen3 tokenizer from ``../shared/models`` and prints SAME/DIFF for the calls
(names and decoded arguments), with vLLM's content beside ours. vLLM's content includes any
reasoning (its tool parser runs alone here). Parsers that need their model's special tokens in
the vocabulary (hy_v3, hy_v4) or have no text path (cohere) print ERR.
"""

from __future__ import annotations

import json
from pathlib import Path

from transformers import AutoTokenizer
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.tool_parsers import ToolParserManager

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "tests" / "parsers" / "cases" / "vllm033_new_formats.jsonl"
MODEL = ROOT.parent / "shared" / "models" / "Qwen--Qwen3-0.6B"


def main() -> None:
    tok = AutoTokenizer.from_pretrained(str(MODEL))
    for line in CASES.read_text(encoding="utf-8").splitlines():
        case = json.loads(line)
        if case["parser_kind"] != "tool" or "sglang" in case["id"] or "dynamo" in case["id"]:
            continue
        name, tools = case["parser"], case["request"]["tools"]
        request = ChatCompletionRequest(model="m", messages=[{"role": "user", "content": "x"}], tools=tools)
        try:
            cls = ToolParserManager.get_tool_parser(name)
            try:
                parser = cls(tok, tools)
            except TypeError:
                parser = cls(tok)
            result = parser.extract_tool_calls(case["model_output"], request)
        except Exception as e:  # report and go on
            print(name, "ERR", type(e).__name__, str(e)[:120])
            continue
        got = [(t.function.name, json.loads(t.function.arguments)) for t in result.tool_calls]
        want = [(t["name"], json.loads(t["arguments"])) for t in case["expected"]["tool_calls"]]
        verdict = "SAME" if got == want else "DIFF"
        ours = case["expected"]["content"]
        print(name, verdict, got, "vLLM content", repr(result.content), "ours", repr(ours))


if __name__ == "__main__":
    main()
