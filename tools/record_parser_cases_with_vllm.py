"""Record conformance cases from vLLM 0.33's own parser classes.

Run in a venv with vllm==0.33.0 (not a project dependency), from the worktree root; the Cohere
Command parsers also need ``cohere-melody>=0.14.0`` importable (e.g. ``pip install --target DIR
cohere-melody`` and ``PYTHONPATH=DIR``):

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 ~/vllm/bin/python tools/record_parser_cases_with_vllm.py

For every input in ``INPUTS`` it composes vLLM's parser for the (reasoning, tool) pair the way its
chat serving does (``ParserManager.get_parser`` + the per-request constructor with the request's
``tools`` and ``chat_template_kwargs``), runs the batch ``parse`` and writes the result as a case
of ``tests/parsers/cases/vllm033_measured.jsonl`` (the shape of ``parser_cases.jsonl``). The
tokenizer is Qwen3's (Llama 3.1's where the case says so) from ``../shared/models`` with the
input's marker texts added as special tokens, so markers are single tokens as in the model's
own vocabulary. Stream-shape cases also keep vLLM's token texts and how many argument fragments
each call streamed in (``vllm_stream``). Our streaming equals our
batch by construction, so every case is checked in both modes; where vLLM's one-token-per-delta
streaming gave something else, the case's notes say what.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from transformers import AutoTokenizer
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.parser.parser_manager import ParserManager

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "parsers" / "cases" / "vllm033_measured.jsonl"
MODEL = ROOT.parent / "shared" / "models" / "Qwen--Qwen3-0.6B"
#: A vocabulary without Qwen's plain ``<think>``/``<tool_call>`` tokens (for suffixed-token cases).
LLAMA = ROOT.parent / "shared" / "models" / "meta-llama--Llama-3.1-8B-Instruct"

THINK = ["<think>", "</think>"]
R1_FAMILY = ["deepseek_r1", "step5", "holo2", "ernie45", "hy_v4", "k2_horizon"]


def _think_cases() -> list[dict[str, Any]]:
    """Empty reasoning: "" (vLLM's legacy BaseThinkingReasoningParser batch) or null (engine)."""
    out = []
    texts = {
        "shortest": "</think>This is the rest",
        "empty_think": "<think></think>answer",
        "empty_output": "",
    }
    pairs = {"k2_horizon": ("<ifm|think>", "</ifm|think>"), "minimax_m3": ("<mm:think>", "</mm:think>")}
    names = [*R1_FAMILY, "qwen3", "glm45", "kimi_k2", "minimax_m3", "seed_oss", "mimo", "nemotron_v3"]
    for name in names:
        start, end = pairs.get(name, ("<think>", "</think>"))
        if name == "seed_oss":
            start, end = "<seed:think>", "</seed:think>"
        for key, text in texts.items():
            if name == "minimax_m3" and key == "empty_output":
                continue  # content "" (not null) for an empty output is the derender's rule
            text = text.replace("</think>", end).replace("<think>", start)
            out.append({"id": f"{name}/{key}", "reasoning": name, "text": text, "extra": [start, end]})
    for name, kwargs in (
        ("deepseek_v3", {"thinking": True}),
        ("poolside_v1", {"thinking": True}),
        ("hy_v3", {"reasoning_effort": "high"}),
        ("minimax_m3", {"thinking_mode": "enabled"}),
    ):
        start, end = pairs.get(name, ("<think>", "</think>"))
        for key, text in (("shortest", f"{end}This is the rest"), ("empty_think", f"{start}{end}answer")):
            out.append(
                {
                    "id": f"{name}/{key}/thinking",
                    "reasoning": name,
                    "text": text,
                    "kwargs": kwargs,
                    "extra": [start, end, "<assistant>"],
                }
            )
    return out


CITY_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "f",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
#: JSON arguments with ``\\uXXXX`` escapes (a BMP letter, a surrogate pair, an ASCII letter) next
#: to escapes that must stay escaped (quote, newline, backslash), and generated spacing.
ESCAPED_ARGS = '{"city":"M\\u00fcnster \\ud83d\\ude00 \\u0041 \\/ \\"q\\" \\n \\\\",  "n" :1}'
DS_CALL = "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>"
DS_END = "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
ESCAPE_OUTPUTS = {
    "hermes": ('<tool_call>{"name": "f", "arguments": ARGS}</tool_call>', ["<tool_call>", "</tool_call>"]),
    "llama3_json": ('{"name": "f", "parameters": ARGS}', ["<|python_tag|>"]),
    "mistral": ('[TOOL_CALLS][{"name": "f", "arguments": ARGS}]', ["[TOOL_CALLS]"]),
    "granite": ('<|tool_call|>[{"name": "f", "arguments": ARGS}]', ["<|tool_call|>"]),
    "granite4": ('<tool_call>{"name": "f", "arguments": ARGS}</tool_call>', ["<tool_call>", "</tool_call>"]),
    "xlam": ('[{"name": "f", "arguments": ARGS}]', []),
    "jamba": (
        '<tool_calls>[{"name": "f", "arguments": ARGS}]</tool_calls>',
        ["<tool_calls>", "</tool_calls>"],
    ),
    "internlm": (
        '<|action_start|><|plugin|>{"name": "f", "parameters": ARGS}<|action_end|>',
        ["<|action_start|>", "<|plugin|>", "<|action_end|>"],
    ),
    "hunyuan_a13b": (
        '<tool_calls>[{"name": "f", "arguments": ARGS}]</tool_calls>',
        ["<tool_calls>", "</tool_calls>"],
    ),
    "longcat": (
        '<longcat_tool_call>{"name": "f", "arguments": ARGS}</longcat_tool_call>',
        ["<longcat_tool_call>", "</longcat_tool_call>"],
    ),
    "ernie45": ('<tool_call>{"name": "f", "arguments": ARGS}</tool_call>', ["<tool_call>", "</tool_call>"]),
    "phi4_mini_json": ('functools[{"name": "f", "arguments": ARGS}]', []),
    "kimi_k2": (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>ARGS"
        "<|tool_call_end|><|tool_calls_section_end|>",
        [
            "<|tool_calls_section_begin|>",
            "<|tool_call_begin|>",
            "<|tool_call_argument_begin|>",
            "<|tool_call_end|>",
            "<|tool_calls_section_end|>",
        ],
    ),
    "deepseek_v3": (
        DS_CALL + "function<｜tool▁sep｜>f\n```json\nARGS\n```" + DS_END,
        [
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁sep｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
        ],
    ),
    "deepseek_v31": (
        DS_CALL + "f<｜tool▁sep｜>ARGS" + DS_END,
        [
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁sep｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
        ],
    ),
    "qwen3_json": (
        '<tool_call>{"name": "f", "arguments": ARGS}</tool_call>',
        ["<tool_call>", "</tool_call>"],
    ),
}


def _escape_cases() -> list[dict[str, Any]]:
    """``\\uXXXX`` escapes in JSON arguments: vLLM's batch re-serialises (or keeps) them."""
    out = []
    for name, (text, extra) in ESCAPE_OUTPUTS.items():
        out.append(
            {
                "id": f"{name}/unicode_escapes",
                "tool": name,
                "text": text.replace("ARGS", ESCAPED_ARGS),
                "tools": CITY_TOOL,
                "extra": extra,
            }
        )
    return out


WEATHER_TOOL = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            },
        },
    }
]


def _hy_suffix_cases() -> list[dict[str, Any]]:
    """HY-V4 checkpoints whose structural tokens carry a suffix (read from the vocabulary)."""
    sfx = ":6124c78e"
    tags = ["think", "tool_calls", "tool_call", "arg_key", "arg_value"]
    extra = [f"<{t}{sfx}>" for t in tags] + [f"</{t}{sfx}>" for t in tags]
    call = (
        f"<tool_calls{sfx}><tool_call{sfx}>get_weather<arg_key{sfx}>city</arg_key{sfx}><arg_value{sfx}>Paris"
        f"</arg_value{sfx}><arg_key{sfx}>days</arg_key{sfx}><arg_value{sfx}>3</arg_value{sfx}></tool_call{sfx}>"
        f"</tool_calls{sfx}>"
    )
    return [
        {
            "id": "hy_v4/suffixed_think",
            "reasoning": "hy_v4",
            "text": f"plan</think{sfx}>answer",
            "extra": extra,
            "llama": True,
        },
        {
            "id": "hy_v4/suffixed_plain_think_is_text",
            "reasoning": "hy_v4",
            "text": "a</think>b",
            "extra": extra,
            "llama": True,
        },
        {
            "id": "hy_v4/suffixed_call",
            "reasoning": "hy_v4",
            "tool": "hy_v4",
            "tools": WEATHER_TOOL,
            "text": f"plan</think{sfx}>ok{call}",
            "extra": extra,
            "llama": True,
        },
    ]


def _format_gap_cases() -> list[dict[str, Any]]:
    """Granite 4.2 thinking's leading content newline; MiniCPM-V's literal ``\\n`` pairs."""
    out: list[dict[str, Any]] = []
    granite = {
        "template_newline": "plan\n</think>\nanswer",
        "two_newlines": "plan</think>\n\nanswer",
        "only_newline": "plan</think>\n",
        "newline_then_text_later": "plan</think>\n \nx",
    }
    minicpmv = {
        "literal_newlines": "plan</think>line1\\nline2\\n\\nend",
        "in_code": "plan</think>a\\nb `x\\ny` ```\\nc\\n``` d",
        "in_latex": "plan</think>$a\\nb$ and \\(x\\ny\\) then\\nz",
        "in_reasoning": "p\\nq</think>r",
    }
    for name, texts in (("granite_thinking_parser", granite), ("minicpmv", minicpmv)):
        for key, text in texts.items():
            out.append({"id": f"{name}/{key}", "reasoning": name, "text": text, "extra": THINK})
    return out


GEMMA_Q = '<|"|>'
NS = "]<]minimax[>["
WEATHER_MARKERS = {
    "gemma4": ["<|tool_call>", "<tool_call|>", GEMMA_Q],
    "functiongemma": ["<start_function_call>", "<end_function_call>", "<escape>"],
    "apertus": ["<|tools_prefix|>", "<|tools_suffix|>"],
    "cohere_command3": ["<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_ACTION|>", "<|END_ACTION|>"],
    "plamo3": [
        *(f"<|plamo:{m}:plamo|>" for m in (
            "begin_tool_requests", "end_tool_requests", "begin_tool_request", "end_tool_request",
            "begin_tool_name", "end_tool_name", "begin_tool_arguments", "end_tool_arguments",
        )),
        "<|plamo:constrain|>", "<|plamo:msg|>",
    ],
    "kimi_k3": ["<|open|>", "<|close|>", "<|sep|>"],
    "minimax_m3": [NS],
}  # fmt: skip
WEATHER_CALLS = {
    "gemma4": [
        "Hi<|tool_call>call:get_weather{city:Q Paris, FR Q,days:3}<tool_call|>".replace("Q ", GEMMA_Q)
        .replace(" Q", GEMMA_Q),
        f"<|tool_call>call:get_weather{{city:{GEMMA_Q}A{GEMMA_Q}}}<tool_call|>"
        "<|tool_call>call:get_weather{days:12}<tool_call|>",
    ],
    "functiongemma": ["<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>"],
    "apertus": [
        'ok <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"get_weather": {"city": "Rome"}}]'
        "<|tools_suffix|>"
    ],
    "cohere_command3": [
        '<|START_RESPONSE|>Sure<|END_RESPONSE|><|START_ACTION|>[{"tool_call_id":"0","tool_name":"get_weather",'
        '"parameters":{"city":"Paris","days":3}},{"tool_call_id":"1","tool_name":"get_weather",'
        '"parameters":{"city":"Rome"}}]<|END_ACTION|>'
    ],
    "plamo3": [
        "ok<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>"
        "get_weather<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json"
        '<|plamo:msg|>{"city": "Paris", "days": 3}<|plamo:end_tool_arguments:plamo|>'
        "<|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>"
    ],
    "kimi_k3": [
        "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"1\"<|sep|><|open|>argument "
        'key="city" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>'
        "<|close|>tools<|sep|>"
    ],
    "minimax_m3": [
        f'{NS}<tool_call>\n{NS}<invoke name="get_weather">\n{NS}<city>Paris{NS}</city>\n'
        f"{NS}<days>3{NS}</days>\n{NS}</invoke>\n{NS}</tool_call>"
    ],
}


def _stream_shape_cases() -> list[dict[str, Any]]:
    """Which formats stream argument deltas (vLLM's per-call fragment counts are recorded)."""
    out = []
    for name, texts in WEATHER_CALLS.items():
        for i, text in enumerate(texts):
            out.append(
                {
                    "id": f"{name}/stream_shape/{i}",
                    "tool": name,
                    "reasoning": name if name == "cohere_command3" else None,
                    "text": text,
                    "tools": WEATHER_TOOL,
                    "extra": WEATHER_MARKERS[name],
                    "shape": True,
                }
            )
    return out


def _element(name: str, value: str) -> str:
    return f"{NS}<{name}>{value}{NS}</{name}>"


M3_SCHEMA = {
    "type": "object",
    "properties": {
        "items": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}},
            },
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "nums": {"type": "array", "items": {"type": "integer"}},
        "user_id": {"type": "string"},
        "n": {"type": "integer"},
        "x": {"type": "number"},
        "ok": {"type": "boolean"},
        "o": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}},
        "free": {},
    },
}
M3_BODIES = {
    "array_of_objects": _element(
        "items",
        _element("item", _element("sku", "b1") + _element("qty", "2"))
        + _element("item", _element("sku", "b2")),
    ),
    "array_one_item": _element("items", _element("item", _element("sku", "b1"))),
    "array_of_strings": _element("tags", _element("item", "x") + _element("item", "42")),
    "array_of_integers": _element("nums", _element("item", "1") + _element("item", "2")),
    "array_as_json_text": _element("tags", '["a", "b"]'),
    "array_empty": _element("tags", ""),
    "string_of_digits": _element("user_id", "42"),
    "integer_not_a_number": _element("n", "abc"),
    "number_and_integer": _element("x", "1.5") + _element("n", "7"),
    "boolean": _element("ok", "True"),
    "object": _element("o", _element("a", "1") + _element("b", "2")),
    "no_schema": _element("free", "3") + _element("undeclared", "[1]"),
}


def _minimax_m3_typed_cases() -> list[dict[str, Any]]:
    """MiniMax M3 parameter values typed from the tool's JSON schema."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": M3_SCHEMA}}]
    return [
        {
            "id": f"minimax_m3/schema_typed/{key}",
            "tool": "minimax_m3",
            "text": f'{NS}<tool_call>\n{NS}<invoke name="f">\n{body}\n{NS}</invoke>\n{NS}</tool_call>',
            "tools": tools,
            "extra": [NS],
        }
        for key, body in M3_BODIES.items()
    ]


K2_PAIRS = ["<ifm|think>", "</ifm|think>", "<ifm|think_fast>", "</ifm|think_fast>"]
K2_PAIRS += ["<ifm|think_faster>", "</ifm|think_faster>", "<ifm|tool_calls>"]
K2_EFFORTS = {
    "high": ("<ifm|think>", "</ifm|think>"),
    "medium": ("<ifm|think_fast>", "</ifm|think_fast>"),
    "low": ("<ifm|think_faster>", "</ifm|think_faster>"),
}


def _k2_effort_cases() -> list[dict[str, Any]]:
    """K2 Horizon: only the requested ``reasoning_effort``'s marker pair counts (another pair
    inside the reasoning is reasoning text; the effort's own end marker closes it)."""
    out = []
    for effort, (start, end) in K2_EFFORTS.items():
        for other, (o_start, o_end) in K2_EFFORTS.items():
            text = f"{start}a{end}b" if other == effort else f"{o_start}a{o_end}b{end}c"
            out.append(
                {
                    "id": f"k2_horizon/effort_{effort}/{other}_pair",
                    "reasoning": "k2_horizon",
                    "text": text,
                    "kwargs": {"reasoning_effort": effort},
                    "extra": K2_PAIRS,
                }
            )
    return out


INPUTS: list[dict[str, Any]] = [
    *_think_cases(),
    *_escape_cases(),
    *_hy_suffix_cases(),
    *_format_gap_cases(),
    *_stream_shape_cases(),
    *_minimax_m3_typed_cases(),
    *_k2_effort_cases(),
]


def _request(item: dict[str, Any]) -> ChatCompletionRequest:
    body: dict[str, Any] = {"model": "m", "messages": [{"role": "user", "content": "x"}]}
    if item.get("tools"):
        body |= {"tools": item["tools"], "tool_choice": item.get("tool_choice", "auto")}
    if item.get("kwargs"):
        body["chat_template_kwargs"] = item["kwargs"]
    return ChatCompletionRequest(**body)


def _parser(item: dict[str, Any], tok: Any, request: ChatCompletionRequest) -> Any:
    cls = ParserManager.get_parser(
        tool_parser_name=item.get("tool"),
        reasoning_parser_name=item.get("reasoning"),
        enable_auto_tools=True,
        tokenizer=tok,
    )
    return cls(tok, request.tools, chat_template_kwargs=item.get("kwargs") or {}, model_config=None)


def _stream(item: dict[str, Any], tok: Any, request: ChatCompletionRequest) -> dict[str, Any]:
    """vLLM's one-token-per-delta result; ``item["fragments"]`` gets each call's count of
    non-empty argument fragments, ``item["chunks"]`` the token texts."""
    parser = _parser(item, tok, request)
    ids = tok.encode(item["text"], add_special_tokens=False)
    reasoning = content = None
    calls: dict[int, list[str]] = {}
    fragments: dict[int, int] = {}
    item["chunks"] = [tok.decode([token]) for token in ids]
    for i, token in enumerate(ids):
        delta = parser.parse_delta(tok.decode([token]), [token], request, [], finished=i == len(ids) - 1)
        if delta is None:
            continue
        if delta.reasoning is not None:
            reasoning = (reasoning or "") + delta.reasoning
        if delta.content is not None:
            content = (content or "") + delta.content
        for tc in delta.tool_calls or []:
            entry = calls.setdefault(tc.index, ["", ""])
            entry[0] += (tc.function.name or "") if tc.function else ""
            entry[1] += (tc.function.arguments or "") if tc.function else ""
            if tc.function and tc.function.arguments:
                fragments[tc.index] = fragments.get(tc.index, 0) + 1
    item["fragments"] = [fragments.get(i, 0) for i in sorted(calls)]
    return {
        "content": content,
        "reasoning": reasoning,
        "tool_calls": [{"name": n, "arguments": a} for n, a in calls.values()],
    }


def main() -> None:
    lines = []
    for item in INPUTS:
        tok = AutoTokenizer.from_pretrained(str(LLAMA if item.get("llama") else MODEL))
        tok.add_tokens([t for t in item.get("extra", []) if t not in tok.get_vocab()], special_tokens=True)
        request = _request(item)
        reasoning, content, tool_calls = _parser(item, tok, request).parse(
            item["text"],
            request,
            enable_auto_tools=True,
            model_output_token_ids=tok.encode(item["text"], add_special_tokens=False),
        )
        expected = {
            "content": content,
            "reasoning": reasoning,
            "tool_calls": [{"name": c.name, "arguments": c.arguments} for c in tool_calls or []],
        }
        stream = _stream(item, tok, request)
        notes = item.get("notes", "")
        if stream != expected:
            notes = (
                notes + " " if notes else ""
            ) + f"vLLM streaming (one token per delta) gave {json.dumps(stream)}."
        kind = "tool" if item.get("tool") else "reasoning"
        case = {
            "id": f"measured/{item['id']}",
            "source": "vLLM 0.33 parser classes, batch (tools/record_parser_cases_with_vllm.py)",
            "parser_kind": kind,
            "parser": item.get("tool") or item["reasoning"],
            "model": "n/a",
            "model_output": item["text"],
            "request": {
                k: v
                for k, v in (
                    ("tools", item.get("tools")),
                    ("tool_choice", item.get("tool_choice")),
                    ("chat_template_kwargs", item.get("kwargs")),
                )
                if v
            }
            or None,
            "expected": expected,
            "notes": notes,
            "modes": ["batch", "streaming"],
        }
        if item.get("llama"):  # the model's own special tokens: the suffix is read from them
            case["vocab_tokens"] = item["extra"]
        if kind == "tool" and item.get("reasoning"):
            case["reasoning_parser"] = item["reasoning"]
        if item.get("shape"):  # how vLLM streamed the arguments (tests/parsers/test_stream_shape.py)
            case["vllm_stream"] = {"chunks": item["chunks"], "argument_fragments": item["fragments"]}
        lines.append(json.dumps(case, ensure_ascii=False))
        print(case["id"], json.dumps(expected, ensure_ascii=False)[:160])
    OUT.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
