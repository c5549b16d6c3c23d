"""Record vLLM 0.33's answers to the derender cases the harness found, as goldens for our tests.

    python -m tools.differential.record [--vllm ~/vllm/bin/vllm] [--port 8141] [--kinds]

Starts ``vllm launch render`` on the Qwen3 folder with the README's flags, sends each case of
:func:`cases` and writes ``tests/data/vllm_derender_golden.json`` (body, status, answer). The
tests (``tests/test_derender_vllm_golden.py``) then need no vLLM. With ``--kinds`` it records the
parser kinds of :data:`KIND_CASES` on their own model folders instead (batch answer and one-token
stream, ``tests/data/vllm_derender_kinds.json``, read by ``tests/test_differential_kinds.py``).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

import httpx

from .servers import MODEL_FLAGS, vllm_server

MODEL = "Qwen--Qwen3-0.6B"
OUT = Path(__file__).resolve().parents[2] / "tests" / "data" / "vllm_derender_golden.json"


def _partial(tok: Any, text: str) -> list[int]:
    """The ids of ``text`` cut after the first token that leaves a character incomplete."""
    ids = tok.encode(text, add_special_tokens=False)
    for k in range(1, len(ids)):
        if tok.decode(ids[:k]).endswith("\ufffd"):
            return ids[:k]
    raise ValueError(f"no partial character in {text!r}")


def cases(tok: Any) -> list[dict[str, Any]]:
    """``[{"name", "path", "body"}]``: the derender kinds (non-parser) of issue 8."""
    cut = _partial(tok, "Hi 😶‍🌫️ there")
    special = tok.encode("<|im_start|>assistant\nHi<think>x</think> <|endoftext|>ok",
                         add_special_tokens=False)
    metrics = {"arrival_time": 1.5, "queue_time_ms": 2.0}
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    out: list[dict[str, Any]] = []

    def cmp(name: str, responses: list[dict[str, Any]], **extra: Any) -> None:
        out.append({"name": name, "path": "/v1/completions/derender",
                    "body": {"generate_responses": responses, **extra}})

    cmp("completion_length_cut_partial_char",
        [{"request_id": "cmpl-a", "choices": [{"index": 0, "token_ids": cut, "finish_reason": "length"}],
          "metrics": metrics}])
    cmp("completion_stop_no_eos_partial_char",
        [{"request_id": "cmpl-b", "choices": [{"index": 0, "token_ids": cut, "finish_reason": "stop"}]}],
        completion_request={"prompt": "x", "return_token_ids": True})
    cmp("completion_two_responses_default_usage",
        [{"request_id": "cmpl-c", "choices": [{"index": 0, "token_ids": cut[:1]}], "metrics": metrics},
         {"request_id": "cmpl-d", "choices": [{"index": 0, "token_ids": cut[:2]}]}])
    cmp("completion_prompt_tokens_given",
        [{"request_id": "cmpl-e", "choices": [{"index": 0, "token_ids": cut[:1]}],
          "metrics": {"time_to_first_token_ms": 3.5}}], prompt_tokens=[7])
    for skip in (None, True, False):
        for spaces in (None, False):
            req: dict[str, Any] = {"prompt": "x"}
            if skip is not None:
                req["skip_special_tokens"] = skip
            if spaces is not None:
                req["spaces_between_special_tokens"] = spaces
            cmp(f"completion_special_tokens_skip_{skip}_spaces_{spaces}",
                [{"request_id": "cmpl-s", "choices": [{"index": 0, "token_ids": special,
                                                      "finish_reason": "length"}]}],
                completion_request=req)
            out.append({"name": f"chat_special_tokens_skip_{skip}_spaces_{spaces}",
                        "path": "/v1/chat/completions/derender",
                        "body": {"generate_response": {"request_id": "chatcmpl-s", "choices": [
                            {"index": 0, "token_ids": special, "finish_reason": "length"}]},
                            "chat_request": {**chat, **{k: v for k, v in req.items()
                                                        if k != "prompt"}},
                            "prompt_token_ids": [151644, 872, 198, 6023, 151645, 198, 151644,
                                                 77091, 198]}})
    out.append({"name": "chat_length_cut_partial_char", "path": "/v1/chat/completions/derender",
                "body": {"generate_response": {"request_id": "chatcmpl-p", "choices": [
                    {"index": 0, "token_ids": cut, "finish_reason": "length"}], "metrics": metrics},
                    "chat_request": chat, "prompt_token_ids": [151644, 872, 198]}})
    out.append({"name": "completion_stream_metrics", "path": "/v1/completions/derender",
                "body": {"stream": True, "generate_chunk": {"request_id": "cmpl-m", "choices": [
                    {"index": 0, "token_ids": cut[:1], "finish_reason": "length"}], "metrics": metrics},
                    "completion_request": {"prompt": "x"}}})
    out.append({"name": "chat_stream_metrics", "path": "/v1/chat/completions/derender",
                "body": {"stream": True, "generate_chunk": {"request_id": "chatcmpl-m", "choices": [
                    {"index": 0, "token_ids": cut[:1], "finish_reason": "length"}], "metrics": metrics},
                    "chat_request": chat, "prompt_token_ids": [151644, 872, 198]}})
    out += _newcomer_cases(tok, chat)
    return out


def _newcomer_cases(tok: Any, chat: dict[str, Any]) -> list[dict[str, Any]]:
    """Derender input checks: a stop string inside tool-call arguments, token ids outside the
    vocabulary, duplicate choice ``index`` values, a choice without ``index``."""
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    call = tok.encode('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
                      '</tool_call>', add_special_tokens=False)
    cut = next(k + 1 for k in range(len(call)) if "Pa" in tok.decode(call[: k + 1]))
    with_tools = {**chat, "tools": tools, "stop": ["Pa"]}
    chat_path, cmp_path = "/v1/chat/completions/derender", "/v1/completions/derender"
    oov = len(tok) + 5000  # past the tokenizer and the embedding rows
    gap = len(tok) + 10  # past the tokenizer, inside the padded embedding

    def chat_case(name: str, choices: list[dict[str, Any]], req: dict[str, Any]) -> dict[str, Any]:
        return {"name": name, "path": chat_path, "body": {
            "generate_response": {"request_id": "chatcmpl-n", "choices": choices},
            "chat_request": req}}

    def cmp_case(name: str, responses: list[dict[str, Any]]) -> dict[str, Any]:
        return {"name": name, "path": cmp_path, "body": {"generate_responses": responses}}

    one = [{"index": 0, "token_ids": [9707]}]
    return [
        chat_case("chat_stop_string_in_tool_args_reported",
                  [{"index": 0, "token_ids": call[:cut], "finish_reason": "stop", "stop_reason": "Pa"}],
                  with_tools),
        chat_case("chat_stop_string_in_tool_args_unreported",
                  [{"index": 0, "token_ids": call[:cut], "finish_reason": "stop"}], with_tools),
        chat_case("chat_stop_string_in_tool_args_whole_output",
                  [{"index": 0, "token_ids": call, "finish_reason": "stop"}], with_tools),
        chat_case("chat_token_id_out_of_vocab", [{"index": 0, "token_ids": [9707, oov]}], chat),
        chat_case("chat_token_id_in_embedding_padding", [{"index": 0, "token_ids": [9707, gap]}], chat),
        cmp_case("completion_token_id_out_of_vocab", [{"request_id": "c", "choices": [
            {"index": 0, "token_ids": [9707, oov]}]}]),
        {"name": "completion_stream_token_id_out_of_vocab", "path": cmp_path, "body": {
            "stream": True, "completion_request": {"prompt": "x"}, "generate_chunk": {
                "request_id": "c", "choices": [{"index": 0, "token_ids": [9707, oov]}]}}},
        chat_case("chat_duplicate_choice_index", one + one, chat),
        cmp_case("completion_duplicate_choice_index", [{"request_id": "c", "choices": one + one}]),
        cmp_case("completion_same_index_in_two_responses", [{"request_id": "c", "choices": one},
                                                            {"request_id": "d", "choices": one}]),
        chat_case("chat_choice_without_index", [{"token_ids": [9707]}], chat),
        cmp_case("completion_choice_without_index", [{"request_id": "c", "choices": [
            {"token_ids": [9707]}]}]),
        {"name": "chat_stream_choice_without_index", "path": chat_path, "body": {
            "stream": True, "chat_request": chat, "generate_chunk": {
                "request_id": "c", "choices": [{"token_ids": [9707]}]}}},
    ]


KINDS_OUT = OUT.parent / "vllm_derender_kinds.json"
_TOOL_A = [{"type": "function", "function": {"name": "A", "parameters": {"type": "object"}}}]
_TOOL_ADD = [{"type": "function", "function": {"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}}}}}]

#: The parser kinds the harness found (issue 8), per model folder: ``(name, output text, end
#: token or None, finish_reason, chat request fields)``. The tests say which are deliberate.
KIND_CASES: dict[str, list[tuple[str, str, str | None, str, dict[str, Any]]]] = {
    "Qwen--Qwen3-0.6B": [
        ("qwen3_draft_call_before_think_end",  # bug case BR25
         '<think>\nlet me call tool A\n<tool_call>{"name": "A", "arguments": {}}</tool_call>\n'
         'then analyse\n</think>\n<tool_call>{"name": "A", "arguments": {}}</tool_call>',
         "<|im_end|>", "stop", {"tools": _TOOL_A}),
        ("qwen3_draft_call_reasoning_goes_on",
         'plan <tool_call>\n{"name": "A", "arguments": {}}\n</tool_call> more thought',
         "<|im_end|>", "stop", {"tools": _TOOL_A}),
        ("qwen3_call_ends_unterminated_reasoning",
         'plan <tool_call>\n{"name": "A", "arguments": {}}\n</tool_call>\n',
         "<|im_end|>", "stop", {"tools": _TOOL_A}),
    ],
    "Qwen--Qwen3-Coder-30B-A3B-Instruct": [
        ("coder_text_after_call", "x<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n"
         "</function>\n</tool_call>y", "<|im_end|>", "stop", {"tools": _TOOL_ADD}),
        ("coder_stray_function_after_call_without_tools",
         "x<tool_call>\n<function=get_weather>\n</function>\n</tool_call>y<function=add>",
         "<|im_end|>", "stop", {}),
        ("coder_stray_parameter_after_call_tool_choice_none",
         "x<tool_call>\n<function=add>\n</function>\n</tool_call><parameter=a>z", "<|im_end|>",
         "stop", {"tools": _TOOL_ADD, "tool_choice": "none"}),
    ],
    "openai--gpt-oss-20b": [
        ("harmony_length_cut_after_start", "<|channel|>analysis<|message|> 42<|start|>", None,
         "length", {}),
        ("harmony_length_cut_inside_next_header",
         "<|channel|>analysis<|message|> 42<|start|>assistant<|channel|>final<|message|> {", None,
         "length", {}),
        ("harmony_call_header_inside_analysis",
         "<|channel|>analysis<|message|>x<|start|>assistant<|channel|>commentary to=functions.add "
         '<|constrain|>json<|message|>{"a": 1}<|call|>', None, "stop", {"tools": _TOOL_ADD}),
        ("harmony_lone_stop_token", "", "<|return|>", "stop", {}),
        ("harmony_repeated_leading_start",
         "<|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>"
         '{"a": 1}<|call|><|start|>assistant<|channel|>commentary to=functions.add '
         '<|constrain|>json<|message|>{"a": 2}<|call|>', None, "stop", {"tools": _TOOL_ADD}),
    ],
    "mistralai--Mistral-Nemo-Instruct-2407": [
        ("mistral_second_tool_calls_block",
         '[TOOL_CALLS][{"name": "add", "arguments": {"a": 1}}][TOOL_CALLS][{"name": "add", '
         '"arguments": {"a": 2}}]', "</s>", "stop", {"tools": _TOOL_ADD}),
        ("mistral_tool_calls_text_under_none", "[TOOL_CALLS]![INST]", None, "stop",
         {"tools": _TOOL_ADD, "tool_choice": "none"}),
        ("mistral_repeated_marker", 'y[TOOL_CALLS][TOOL_CALLS][{"name": "add", "arguments": '
         '{"a": 1}}] 42', "</s>", "stop", {"tools": _TOOL_ADD}),
        ("mistral_length_cut_in_block", 'Ünï[TOOL_CALLS][{"name": "ad', None, "length", {}),
        ("mistral_call_dropped_without_tools", '[TOOL_CALLS][{"name": "add", "arguments": '
         '{"a": 1}}]', "</s>", "stop", {}),
        ("mistral_empty_output_with_tools", "", "</s>", "stop", {"tools": _TOOL_ADD}),
        ("mistral_named_choice_text", " world\n", None, "length",
         {"tools": _TOOL_ADD, "tool_choice": {"type": "function", "function": {"name": "add"}}}),
    ],
    "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B": [
        ("r1_think_after_reasoning_text", " é<think> é<think>", "<｜end▁of▁sentence｜>", "stop", {}),
        ("r1_empty_content_after_think_end", "</think>", "<｜end▁of▁sentence｜>", "stop", {}),
        ("r1_special_token_text_kept", " a<｜begin▁of▁sentence｜>b</think>c<|im_start|>d",
         "<｜end▁of▁sentence｜>", "stop", {}),
    ],
    "Qwen--Qwen2.5-7B-Instruct": [
        ("hermes_special_token_text_kept", "</think><|im_start|> world<|endoftext|>!",
         "<|im_end|>", "stop", {}),
        ("hermes_special_token_text_kept_with_call",
         '<|im_start|>x\n<tool_call>\n{"name": "A", "arguments": {}}\n</tool_call>', "<|im_end|>",
         "stop", {"tools": _TOOL_A}),
    ],
}
KIND_CASES["meta-llama--Llama-3.1-8B-Instruct"] = [
    ("llama_python_tag_text_without_call", "🎉🎉<|python_tag|><|python_tag|>", "<|eot_id|>",
     "stop", {"tools": _TOOL_ADD}),
    ("llama_python_tag_before_call", '<|python_tag|>{"name": "add", "parameters": {"a": 1}}',
     "<|eom_id|>", "stop", {"tools": _TOOL_ADD}),
    ("llama_text_before_call_named", '! 42{"name": "add", "parameters": {}}', "<|eot_id|>",
     "stop", {"tools": _TOOL_ADD, "tool_choice": {"type": "function", "function": {"name": "add"}}}),
    ("llama_empty_arguments_unseparated_calls", '{"name": "add", "parameters": {}}{"name": '
     '"unknown_fn", "parameters": {"city": "Paris"}}', "<|eot_id|>", "stop", {"tools": _TOOL_ADD}),
]
#: Cases of the same kinds recorded later for folders already listed above.
KIND_CASES["Qwen--Qwen3-0.6B"] += [
    ("qwen3_special_token_text_dropped", "</think><|im_start|> world<|endoftext|>!", "<|im_end|>",
     "stop", {}),
]
_CODER_CALL = "<tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n</tool_call>"
KIND_CASES["Qwen--Qwen3-Coder-30B-A3B-Instruct"] += [
    ("coder_whitespace_around_content_before_call", "\n 42 42\n" + _CODER_CALL, "<|im_end|>",
     "stop", {"tools": _TOOL_ADD}),
    ("coder_blank_content_before_call", " \n\n" + _CODER_CALL, "<|im_end|>", "stop",
     {"tools": _TOOL_ADD}),
    ("coder_bare_function_then_block_without_tools",
     "x<function=add><tool_call>\n<function=add>\n<parameter=a>\n1\n</parameter>\n</function>\n"
     "</tool_call>y", "<|im_end|>", "stop", {}),
    ("coder_special_token_text_dropped", "a<|im_start|>b<|endoftext|>c", "<|im_end|>", "stop", {}),
]
KIND_CASES["Qwen--Qwen3-0.6B"] += [
    ("qwen3_thinking_off_special_token_text_kept", "</think><|im_start|> world<|endoftext|>!",
     "<|im_end|>", "stop", {"chat_template_kwargs": {"enable_thinking": False}}),
]
KIND_CASES["openai--gpt-oss-20b"] += [
    # the last id is dropped (:data:`CUT_LAST`): a ``length`` cut inside the emoji of a header
    ("harmony_length_cut_in_header_character", " 😶‍🌫️ 😶", None, "length", {}),
    ("harmony_text_arguments_keep_whitespace",
     "<|channel|>commentary to=functions.add<|message|> world world! ", "<|call|>", "stop",
     {"tools": _TOOL_ADD}),
    ("harmony_json_arguments_leading_space",
     '<|channel|>commentary to=functions.add <|constrain|>json<|message|> {"a": 1}', "<|call|>",
     "stop", {"tools": _TOOL_ADD}),
]
#: Cases whose output is their text's ids without the last one (a cut inside a character).
CUT_LAST = frozenset({"harmony_length_cut_in_header_character"})


def _stream_one_token(url: str, base: dict[str, Any], ids: list[int], finish: str) -> Any:
    """vLLM's one-token stream of ``ids``, its chunks joined (``run.aggregate``)."""
    from .run import aggregate

    chunks, state = [], None
    for n, t in enumerate(ids):
        body: dict[str, Any] = {**base, "stream": True, "generate_chunk": {"request_id": "k", "choices": [
            {"index": 0, "token_ids": [t], "finish_reason": finish if n == len(ids) - 1 else None}]}}
        if state is not None:
            body["stream_state"] = state
        r = httpx.post(url + "/v1/chat/completions/derender", json=body, timeout=60).json()
        chunks.append(r["chunk"])
        state = r["stream_state"]
    return aggregate(chunks, chat=True)


def record_kinds(args: argparse.Namespace) -> None:
    """Start vLLM per folder of :data:`KIND_CASES` (one at a time) and write each case's batch
    answer and one-token stream to ``tests/data/vllm_derender_kinds.json``."""
    from transformers import AutoTokenizer

    wanted = set(args.models.split(",")) if args.models else set(KIND_CASES)
    kept = json.loads(KINDS_OUT.read_text()) if args.models and KINDS_OUT.exists() else []
    records = [r for r in kept if r["model"] not in wanted]
    for model, kinds in KIND_CASES.items():
        if model not in wanted:
            continue
        folder = args.models_dir / model
        tok = AutoTokenizer.from_pretrained(str(folder))
        with vllm_server(folder, args.vllm, args.port) as url:
            for name, text, end, finish, fields in kinds:
                ids = tok.encode(text, add_special_tokens=False)
                if name in CUT_LAST:
                    ids = ids[:-1]
                if end is not None:
                    ids.append(tok.convert_tokens_to_ids(end))
                base = {"chat_request": {"messages": [{"role": "user", "content": "hi"}], **fields},
                        "prompt_token_ids": [1]}
                body = {**base, "generate_response": {"request_id": "k", "choices": [
                    {"index": 0, "token_ids": ids, "finish_reason": finish}]}}
                r = httpx.post(url + "/v1/chat/completions/derender", json=body, timeout=60)
                records.append({"name": name, "model": model, "flags": MODEL_FLAGS[model],
                                "output_text": text, "body": body, "status": r.status_code,
                                "response": r.json(),
                                "stream": _stream_one_token(url, base, ids, finish)})
    order = [name for kinds in KIND_CASES.values() for name, *_ in kinds]
    records.sort(key=lambda r: order.index(r["name"]) if r["name"] in order else len(order))
    KINDS_OUT.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} cases to {KINDS_OUT}")


def main() -> None:
    from transformers import AutoTokenizer

    p = argparse.ArgumentParser(prog="python -m tools.differential.record")
    p.add_argument("--vllm", default=os.environ.get("VLLM_BIN", os.path.expanduser("~/vllm/bin/vllm")))
    p.add_argument("--models-dir", type=Path, default=Path("../shared/models"))
    p.add_argument("--port", type=int, default=8141)
    p.add_argument("--kinds", action="store_true", help="record the parser kinds of KIND_CASES "
                   "(tests/data/vllm_derender_kinds.json) instead of the Qwen3 derender cases")
    p.add_argument("--models", "--only", dest="models", default="",
                   help="with --kinds: re-record only these comma-separated "
                   "folders, keeping the other folders' recorded cases")
    args = p.parse_args()
    if args.kinds:
        record_kinds(args)
        return
    folder = args.models_dir / MODEL
    tok = AutoTokenizer.from_pretrained(str(folder))
    with vllm_server(folder, args.vllm, args.port) as url:
        records = []
        for case in cases(tok):
            r = httpx.post(url + case["path"], json=case["body"], timeout=60)
            records.append({**case, "model": MODEL, "flags": MODEL_FLAGS[MODEL],
                            "status": r.status_code, "response": r.json()})
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {len(records)} cases to {OUT}")


if __name__ == "__main__":
    main()
