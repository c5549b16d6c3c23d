"""Record vLLM's ``/v1/messages/render`` and ``/v1/responses/render`` answers for a fixed set of
Anthropic and Responses requests, as goldens for ``tests/test_api_render.py``.

Start the peer first (Qwen3 with the parsers the tests use), then run from the repository root::

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 ~/vllm/bin/vllm launch render \\
        ../shared/models/Qwen--Qwen3-0.6B --port 8160 \\
        --reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice
    python tools/record_api_render_goldens.py --peer http://127.0.0.1:8160

Writes ``tests/data/api_render_goldens.json``: ``[{"name", "path", "request", "status",
"token_ids", "sampling_params", "error"}]`` (``request.model`` is replaced by the tests).
The requests are the hand-made cases below plus a sample of ../shared/data/chat_requests.jsonl
converted by ``tests/api_forms.py``.

``--config gptoss`` records the gpt-oss Responses cases (vLLM renders them through harmony, not
the chat template) into ``tests/data/api_render_goldens_gptoss.json``; start that peer with the
harmony date pinned as the tests pin it (``START_DATE`` of ``tools/render_golden_cases.py``)::

    VLLM_TARGET_DEVICE=cpu HF_HUB_OFFLINE=1 VLLM_SYSTEM_START_DATE=2026-01-15 ~/vllm/bin/vllm launch \
        render ../shared/models/openai--gpt-oss-20b --port 8160 --reasoning-parser openai_gptoss \
        --tool-call-parser openai --enable-auto-tool-choice
    python tools/record_api_render_goldens.py --peer http://127.0.0.1:8160 --config gptoss
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from api_forms import load_chat_requests, to_anthropic, to_responses  # noqa: E402

OUT = ROOT / "tests" / "data" / "api_render_goldens.json"
WEATHER_A = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
WEATHER_R = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": WEATHER_A["input_schema"],
}
USER = [{"role": "user", "content": "Weather in Paris?"}]
TOOL_TURN = [
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "Need the tool.", "signature": "s1"},
            {"type": "redacted_thinking", "data": "b64"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "is_error": True,
                "content": [{"type": "text", "text": "timeout"}, {"type": "text", "text": "retry later"}],
            },
            {"type": "text", "text": "Try again?"},
        ],
    },
]


def anthropic_cases() -> list[tuple[str, dict[str, Any]]]:
    base = {"model": "m", "max_tokens": 100}
    return [
        ("a_plain", {**base, "messages": USER}),
        (
            "a_system_blocks",
            {
                **base,
                "messages": USER,
                "system": [
                    {"type": "text", "text": "x-anthropic-billing-header: abc"},
                    {"type": "text", "text": "Be brief. "},
                    {"type": "text", "text": "Use metric."},
                ],
            },
        ),
        (
            "a_inline_system",
            {
                **base,
                "system": "Top.",
                "messages": [
                    USER[0],
                    {"role": "assistant", "content": "Sure."},
                    {"role": "system", "content": "Reminder."},
                    {"role": "user", "content": "Go"},
                ],
            },
        ),
        (
            "a_tools_auto",
            {
                **base,
                "messages": USER,
                "tools": [WEATHER_A],
                "tool_choice": {"type": "auto", "disable_parallel_tool_use": True},
            },
        ),
        ("a_tools_any", {**base, "messages": USER, "tools": [WEATHER_A], "tool_choice": {"type": "any"}}),
        (
            "a_tools_named",
            {
                **base,
                "messages": USER,
                "tools": [WEATHER_A],
                "tool_choice": {"type": "tool", "name": "get_weather"},
            },
        ),
        ("a_tools_none", {**base, "messages": USER, "tools": [WEATHER_A], "tool_choice": {"type": "none"}}),
        ("a_tool_history", {**base, "messages": TOOL_TURN, "tools": [WEATHER_A]}),
        ("a_thinking_disabled", {**base, "messages": USER, "thinking": {"type": "disabled"}}),
        (
            "a_thinking_enabled",
            {
                **base,
                "max_tokens": 4000,
                "messages": USER,
                "thinking": {"type": "enabled", "budget_tokens": 2048},
            },
        ),
        (
            "a_thinking_budget_too_big",
            {**base, "messages": USER, "thinking": {"type": "enabled", "budget_tokens": 2048}},
        ),
        (
            "a_sampling",
            {
                **base,
                "max_tokens": 17,
                "messages": USER,
                "stop_sequences": ["END", "\n\n"],
                "temperature": 0.3,
                "top_p": 0.9,
                "top_k": 5,
                "metadata": {"user_id": "u1"},
            },
        ),
        (
            "a_image_block",
            {
                **base,
                "messages": [
                    {
                        "role": "user",
                        "content": [
                            {
                                "type": "image",
                                "source": {
                                    "type": "base64",
                                    "media_type": "image/png",
                                    "data": "iVBORw0KGgo=",
                                },
                            },
                            {"type": "text", "text": "What is it?"},
                        ],
                    }
                ],
            },
        ),
    ]


def responses_cases() -> list[tuple[str, dict[str, Any]]]:
    base = {"model": "m"}
    return [
        ("r_plain", {**base, "input": "Weather in Paris?"}),
        ("r_instructions", {**base, "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 50}),
        (
            "r_items",
            {
                **base,
                "input": [
                    {"role": "user", "content": [{"type": "input_text", "text": "Weather in Paris?"}]},
                    {
                        "type": "reasoning",
                        "id": "rs_1",
                        "summary": [],
                        "content": [{"type": "reasoning_text", "text": "Need the tool."}],
                    },
                    {
                        "type": "function_call",
                        "call_id": "call_1",
                        "name": "get_weather",
                        "arguments": '{"city": "Paris"}',
                    },
                    {"type": "function_call_output", "call_id": "call_1", "output": "18C"},
                ],
                "tools": [WEATHER_R],
            },
        ),
        ("r_tool_required", {**base, "input": "Weather?", "tools": [WEATHER_R], "tool_choice": "required"}),
        (
            "r_tool_named",
            {
                **base,
                "input": "Weather?",
                "tools": [WEATHER_R],
                "tool_choice": {"type": "function", "name": "get_weather"},
            },
        ),
        ("r_effort_none", {**base, "input": "Hi", "reasoning": {"effort": "none"}}),
        ("r_effort_high", {**base, "input": "Hi", "reasoning": {"effort": "high"}}),
        (
            "r_json_schema",
            {
                **base,
                "input": "Give a city",
                "text": {
                    "format": {
                        "type": "json_schema",
                        "name": "city",
                        "schema": {"type": "object", "properties": {"name": {"type": "string"}}},
                    }
                },
            },
        ),
        ("r_truncation", {**base, "input": "Hi", "truncation": "auto", "temperature": 0.5, "top_p": 0.8}),
        ("r_previous", {**base, "input": "Hi", "previous_response_id": "resp_123"}),
        ("r_web_search", {**base, "input": "Hi", "tools": [{"type": "web_search"}]}),
        (
            "r_partial",
            {
                **base,
                "input": [
                    {"role": "user", "content": "Count to 3"},
                    {
                        "type": "message",
                        "role": "assistant",
                        "status": "incomplete",
                        "content": [{"type": "output_text", "text": "1, 2", "annotations": []}],
                    },
                ],
            },
        ),
    ]


def _message(role: str, text: str) -> dict[str, Any]:
    part = "output_text" if role == "assistant" else "input_text"
    return {"type": "message", "role": role, "content": [{"type": part, "text": text, "annotations": []}]}


def _reasoning(*texts: str, summary: str | None = None) -> dict[str, Any]:
    return {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [] if summary is None else [{"type": "summary_text", "text": summary}],
        "content": [{"type": "reasoning_text", "text": t} for t in texts],
    }


def _call(call_id: str, city: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "call_id": call_id,
        "name": "get_weather",
        "arguments": json.dumps({"city": city}),
    }


def gptoss_cases() -> list[tuple[str, dict[str, Any]]]:
    """gpt-oss Responses requests: instructions, developer/system items, tools, function_call /
    function_call_output and reasoning items (vLLM 0.33 ``_render_responses_with_harmony``)."""
    base: dict[str, Any] = {"model": "m"}
    user = {"role": "user", "content": "Weather in Paris?"}
    output = {"type": "function_call_output", "call_id": "call_1", "output": "18C"}
    return [
        ("g_plain", {**base, "input": "Weather in Paris?"}),
        ("g_instructions", {**base, "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 50}),
        ("g_developer_item", {**base, "input": [{"role": "developer", "content": "Be brief."}, user]}),
        ("g_system_item", {**base, "input": [{"role": "system", "content": "Be brief."}, user]}),
        (
            "g_instructions_and_system",
            {**base, "instructions": "Top.", "input": [{"role": "system", "content": "Be brief."}, user]},
        ),
        (
            "g_mid_developer",
            {
                **base,
                "input": [
                    user,
                    _message("assistant", "Sunny."),
                    {"role": "developer", "content": "Answer in French."},
                    {"role": "user", "content": "And tomorrow?"},
                ],
            },
        ),
        (
            "g_tools",
            {**base, "input": "Weather in Paris?", "tools": [WEATHER_R], "instructions": "Use tools."},
        ),
        ("g_tools_none", {**base, "input": "Weather in Paris?", "tools": [WEATHER_R], "tool_choice": "none"}),
        ("g_effort_high", {**base, "input": "Hi", "reasoning": {"effort": "high"}}),
        ("g_effort_none", {**base, "input": "Hi", "reasoning": {"effort": "none"}}),
        (
            "g_call_items",
            {
                **base,
                "input": [user, _reasoning("Need the tool."), _call("call_1", "Paris"), output],
                "tools": [WEATHER_R],
            },
        ),
        (
            "g_call_no_reasoning",
            {**base, "input": [user, _call("call_1", "Paris"), output], "tools": [WEATHER_R]},
        ),
        (
            "g_message_then_call",
            {
                **base,
                "input": [
                    user,
                    _reasoning("Need the tool."),
                    _message("assistant", "Checking."),
                    _call("call_1", "Paris"),
                    output,
                ],
                "tools": [WEATHER_R],
            },
        ),
        (
            "g_two_calls_then_answer",
            {
                **base,
                "tools": [WEATHER_R],
                "reasoning": {"effort": "low"},
                "input": [
                    {"role": "user", "content": "Weather in Paris and Rome?"},
                    _reasoning("Two calls."),
                    _call("c1", "Paris"),
                    _call("c2", "Rome"),
                    {"type": "function_call_output", "call_id": "c1", "output": "18C"},
                    {"type": "function_call_output", "call_id": "c2", "output": "25C"},
                    _message("assistant", "Paris 18C, Rome 25C."),
                    {"role": "user", "content": "Thanks"},
                ],
            },
        ),
        (
            "g_multi_turn_reasoning",
            {
                **base,
                "input": [
                    {"role": "user", "content": "Hi"},
                    _reasoning("Greet."),
                    _message("assistant", "Hello!"),
                    {"role": "user", "content": "Weather?"},
                ],
            },
        ),
        (
            "g_reasoning_two_parts",
            {**base, "input": [user, _reasoning("A.", "B."), _call("call_1", "Paris")], "tools": [WEATHER_R]},
        ),
        (
            "g_reasoning_summary_only",
            {
                **base,
                "input": [user, _reasoning(summary="S."), _call("call_1", "Paris")],
                "tools": [WEATHER_R],
            },
        ),
        (
            "g_reasoning_encrypted",
            {
                **base,
                "input": [
                    user,
                    {**_reasoning("T."), "encrypted_content": "xyz"},
                    _message("assistant", "Sunny."),
                    {"role": "user", "content": "Thanks"},
                ],
            },
        ),
        (
            "g_assistant_two_parts",
            {
                **base,
                "input": [
                    user,
                    {
                        "type": "message",
                        "role": "assistant",
                        "content": [
                            {"type": "output_text", "text": "A", "annotations": []},
                            {"type": "output_text", "text": "B", "annotations": []},
                        ],
                    },
                    {"role": "user", "content": "more"},
                ],
            },
        ),
        (
            "g_empty_assistant",
            {**base, "input": [user, _message("assistant", ""), {"role": "user", "content": "again"}]},
        ),
        ("g_output_unknown_call", {**base, "input": [user, {**output, "call_id": "nope"}]}),
        ("g_web_search", {**base, "input": "Hi", "tools": [{"type": "web_search"}]}),
    ]


def sample(data: Path, per_kind: int) -> list[tuple[str, str, dict[str, Any]]]:
    """A few converted real requests of each kind: plain, tools, tool results, reasoning."""
    picked: dict[str, int] = {}
    out = []
    for row in load_chat_requests(data):
        msgs = row["chat"]["messages"]
        kind = (
            "reasoning"
            if any(m.get("reasoning_content") for m in msgs)
            else "tool_results"
            if any(m["role"] == "tool" for m in msgs)
            else "tools"
            if row["chat"].get("tools")
            else "plain"
        )
        if picked.get(kind, 0) >= per_kind:
            continue
        a, r = to_anthropic(row["chat"]), to_responses(row["chat"])
        if a is None or r is None:
            continue
        picked[kind] = picked.get(kind, 0) + 1
        out.append((f"real_a_{row['id']}", "/v1/messages/render", a))
        out.append((f"real_r_{row['id']}", "/v1/responses/render", r))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer", default="http://127.0.0.1:8160")
    ap.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "chat_requests.jsonl"))
    ap.add_argument("--per-kind", type=int, default=2)
    ap.add_argument("--config", choices=("qwen3", "gptoss"), default="qwen3")
    args = ap.parse_args()
    client = httpx.Client(base_url=args.peer, timeout=120)
    model = client.get("/v1/models").json()["data"][0]["id"]
    if args.config == "gptoss":
        cases = [(n, "/v1/responses/render", b) for n, b in gptoss_cases()]
        target = OUT.with_name("api_render_goldens_gptoss.json")
    else:
        cases = [(n, "/v1/messages/render", b) for n, b in anthropic_cases()]
        cases += [(n, "/v1/responses/render", b) for n, b in responses_cases()]
        cases += sample(Path(args.data), args.per_kind)
        target = OUT
    goldens = []
    for name, path, body in cases:
        resp = client.post(path, json={**body, "model": model})
        out = resp.json()
        ok = resp.status_code == 200
        goldens.append(
            {
                "name": name,
                "path": path,
                "request": body,
                "status": resp.status_code,
                "token_ids": out.get("token_ids") if ok else None,
                "sampling_params": out.get("sampling_params") if ok else None,
                "error": None if ok else out.get("error"),
            }
        )
        print(name, resp.status_code)
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = ",\n".join(json.dumps(g, ensure_ascii=False) for g in goldens)  # one golden per line
    target.write_text(f"[\n{lines}\n]\n", encoding="utf-8")
    print(f"wrote {len(goldens)} goldens to {target.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
