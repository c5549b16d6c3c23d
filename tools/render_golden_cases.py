"""Render requests whose vLLM 0.33 answers are recorded as golden files (``tools/record_render_goldens.py``)
and replayed against our server by ``tests/test_render_goldens.py``.

``CONFIGS`` names a model folder under ``../shared/models`` and the ``vllm launch render`` flags;
``cases(config)`` lists ``(name, path, body)`` for that configuration.
"""

from __future__ import annotations

from typing import Any

#: Pinned harmony system-message date (``VLLM_SYSTEM_START_DATE`` on both servers).
START_DATE = "2026-01-15"

CONFIGS: dict[str, dict[str, Any]] = {
    "gptoss": {
        "folder": "openai--gpt-oss-20b",
        "flags": [
            "--reasoning-parser",
            "openai_gptoss",
            "--tool-call-parser",
            "openai",
            "--enable-auto-tool-choice",
        ],
    },
    "qwen3": {
        "folder": "Qwen--Qwen3-0.6B",
        "flags": ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"],
    },
    "coder": {
        "folder": "Qwen--Qwen3-Coder-30B-A3B-Instruct",
        "flags": ["--tool-call-parser", "qwen3_coder", "--enable-auto-tool-choice"],
    },
    "llama": {
        "folder": "meta-llama--Llama-3.1-8B-Instruct",
        "flags": ["--tool-call-parser", "llama3_json", "--enable-auto-tool-choice"],
    },
    "mistral": {
        "folder": "mistralai--Mistral-Nemo-Instruct-2407",
        "flags": ["--tool-call-parser", "mistral", "--enable-auto-tool-choice"],
    },
    "r1": {
        "folder": "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B",
        "flags": ["--reasoning-parser", "deepseek_r1"],
    },
}

CHAT = "/v1/chat/completions/render"
COMPLETIONS = "/v1/completions/render"

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
NO_DESCRIPTION = {
    "type": "function",
    "function": {
        "name": "get_time",
        "parameters": {"type": "object", "properties": {"tz": {"type": "string"}}},
    },
}
NO_PARAMETERS = {"type": "function", "function": {"name": "noargs", "description": "No arguments."}}
STRICT = {
    "type": "function",
    "function": {**WEATHER["function"], "strict": True},
}
USER = [{"role": "user", "content": "Weather in Paris?"}]
CALL_ID = "abcDEF123"


def _history(
    arguments: str = '{"city": "Paris"}', call_type: str | None = "function"
) -> list[dict[str, Any]]:
    call: dict[str, Any] = {"id": CALL_ID, "function": {"name": "get_weather", "arguments": arguments}}
    if call_type is not None:
        call["type"] = call_type
    return [
        *USER,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": CALL_ID, "content": "18°C, sunny"},
    ]


def _chat(**fields: Any) -> dict[str, Any]:
    return {"messages": USER, "max_tokens": 32, **fields}


def cases(config: str) -> list[tuple[str, str, dict[str, Any]]]:
    """The requests sent to both servers for ``config`` (a key of :data:`CONFIGS`)."""
    has_tools = "--tool-call-parser" in CONFIGS[config]["flags"]
    out: list[tuple[str, str, dict[str, Any]]] = [
        ("basic", CHAT, _chat()),
        ("no_max_tokens", CHAT, {"messages": USER}),
        ("prompt_logprobs_0", CHAT, _chat(prompt_logprobs=0)),
        ("prompt_logprobs_2", CHAT, _chat(prompt_logprobs=2)),
        ("stop_token_ids_dup", CHAT, _chat(stop_token_ids=[5, 5, 7, 5])),
        ("bad_words_dup", CHAT, _chat(bad_words=["foo", "bar", "foo"])),
        ("greedy", CHAT, _chat(temperature=0)),
        ("greedy_explicit_top_p", CHAT, _chat(temperature=0, top_p=0.5, top_k=5)),
        ("seed_minus_one", CHAT, _chat(seed=-1)),
        ("seed_7", CHAT, _chat(seed=7)),
        ("skip_special_tokens_false", CHAT, _chat(skip_special_tokens=False)),
        ("reasoning_effort_low", CHAT, _chat(reasoning_effort="low")),
        ("reasoning_effort_high", CHAT, _chat(reasoning_effort="high")),
        ("chat_template_kwargs_tools", CHAT, _chat(chat_template_kwargs={"tools": [WEATHER]})),
        (
            "chat_template_kwargs_documents",
            CHAT,
            _chat(chat_template_kwargs={"documents": [{"title": "t", "text": "doc body"}]}),
        ),
        (
            "chat_template_kwargs_custom",
            CHAT,
            _chat(chat_template_kwargs={"foo": 1, "enable_thinking": False}),
        ),
        ("cohere_format", CHAT, _chat(chat_template_kwargs={"cohere_format": True})),
        ("add_special_tokens", CHAT, _chat(add_special_tokens=True)),
        (
            "empty_text_part",
            CHAT,
            _chat(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": ""}, {"type": "text", "text": "hi"}],
                    }
                ]
            ),
        ),
        (
            "text_parts",
            CHAT,
            _chat(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}],
                    }
                ]
            ),
        ),
        (
            "system_developer",
            CHAT,
            _chat(
                messages=[
                    {"role": "system", "content": "You are terse."},
                    {"role": "developer", "content": "Answer in French."},
                    *USER,
                ]
            ),
        ),
        (
            "two_developers",
            CHAT,
            _chat(
                messages=[
                    {"role": "developer", "content": "Rule one."},
                    {"role": "developer", "content": "Rule two."},
                    *USER,
                ]
            ),
        ),
        (
            "system_parts",
            CHAT,
            _chat(
                messages=[
                    {
                        "role": "system",
                        "content": [{"type": "text", "text": "Be"}, {"type": "text", "text": " brief."}],
                    },
                    *USER,
                ]
            ),
        ),
        (
            "assistant_history",
            CHAT,
            _chat(
                messages=[
                    *USER,
                    {"role": "assistant", "content": "Sunny."},
                    {"role": "user", "content": "Thanks"},
                ]
            ),
        ),
        (
            "reasoning_history",
            CHAT,
            _chat(
                messages=[
                    *USER,
                    {"role": "assistant", "content": "Sunny.", "reasoning": "Look it up."},
                    {"role": "user", "content": "Thanks"},
                ]
            ),
        ),
        (
            "think_markers_in_prompt",
            CHAT,
            _chat(messages=[{"role": "user", "content": "Say <think> then </think> then <think> literally"}]),
        ),
        (
            "think_end_last_in_prompt",
            CHAT,
            _chat(messages=[{"role": "user", "content": "Say <think> then </think> literally"}]),
        ),
        (
            "continue_final",
            CHAT,
            _chat(
                messages=[*USER, {"role": "assistant", "content": "It is"}],
                continue_final_message=True,
                add_generation_prompt=False,
            ),
        ),
        ("empty_messages", CHAT, _chat(messages=[])),
        ("completion", COMPLETIONS, {"prompt": "Hello there", "max_tokens": 8}),
        ("completion_empty_prompt", COMPLETIONS, {"prompt": "", "max_tokens": 8}),
        (
            "completion_offsets",
            COMPLETIONS,
            {"prompt": "Hello there", "max_tokens": 8, "return_token_offsets": True},
        ),
        (
            "completion_dups",
            COMPLETIONS,
            {
                "prompt": "Hi",
                "max_tokens": 8,
                "stop_token_ids": [3, 3],
                "temperature": 0,
                "seed": -1,
                "prompt_logprobs": 0,
            },
        ),
        ("chat_offsets", CHAT, _chat(return_token_offsets=True)),
    ]
    out += [
        ("tools_auto", CHAT, _chat(tools=[WEATHER])),
        ("tool_no_description", CHAT, _chat(tools=[NO_DESCRIPTION])),
        ("tools_two", CHAT, _chat(tools=[WEATHER, NO_DESCRIPTION])),
        ("tool_choice_none", CHAT, _chat(tools=[WEATHER], tool_choice="none")),
        ("history_tool_call", CHAT, _chat(messages=_history(), tools=[WEATHER])),
        ("history_tool_call_no_type", CHAT, _chat(messages=_history(call_type=None), tools=[WEATHER])),
        (
            "history_arguments_not_json",
            CHAT,
            _chat(messages=_history(arguments="city=Paris"), tools=[WEATHER]),
        ),
        ("history_arguments_empty", CHAT, _chat(messages=_history(arguments=""), tools=[WEATHER])),
        (
            "tool_result_parts",
            CHAT,
            _chat(
                messages=[
                    *_history()[:2],
                    {"role": "tool", "tool_call_id": CALL_ID, "content": [{"type": "text", "text": "18°C"}]},
                ],
                tools=[WEATHER],
            ),
        ),
    ]
    out += [  # issue 8: the whole ``structured_outputs`` object, continue_final_message's default
        ("response_format_json_object", CHAT, _chat(response_format={"type": "json_object"})),
        (
            "response_format_json_schema",
            CHAT,
            _chat(response_format={"type": "json_schema",
                                   "json_schema": {"name": "x", "schema": {"type": "object"}}}),
        ),
        ("structured_outputs_regex", CHAT, _chat(structured_outputs={"regex": "a+"})),
        ("completion_response_format", COMPLETIONS, {"prompt": "Weather in Paris?", "max_tokens": 8,
                                                     "response_format": {"type": "json_object"}}),
        (
            "continue_final_message_default_generation_prompt",
            CHAT,
            _chat(messages=[*USER, {"role": "assistant", "content": "It is"}], continue_final_message=True),
        ),
    ]
    if config == "r1":  # vLLM hands ``content: null`` as "" to the template: the call is not rendered
        out.append(("history_tool_call_without_tools", CHAT, _chat(messages=_history())))
    if has_tools:
        out += [
            (
                "tool_named_without_parameters",
                CHAT,
                _chat(
                    tools=[WEATHER, NO_PARAMETERS],
                    tool_choice={"type": "function", "function": {"name": "noargs"}},
                ),
            ),
            ("tool_choice_required", CHAT, _chat(tools=[WEATHER, NO_DESCRIPTION], tool_choice="required")),
            (
                "tool_choice_required_single",
                CHAT,
                _chat(tools=[WEATHER], tool_choice="required", parallel_tool_calls=False),
            ),
            (
                "tool_choice_named",
                CHAT,
                _chat(
                    tools=[WEATHER, NO_DESCRIPTION],
                    tool_choice={"type": "function", "function": {"name": "get_weather"}},
                ),
            ),
            ("tools_strict_auto", CHAT, _chat(tools=[STRICT, NO_DESCRIPTION])),
            ("tools_strict_required", CHAT, _chat(tools=[STRICT], tool_choice="required")),
            (
                "required_with_response_format",
                CHAT,
                _chat(tools=[WEATHER], tool_choice="required", response_format={"type": "json_object"}),
            ),
        ]
    return out
