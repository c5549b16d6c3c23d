"""Malformed requests whose error answers are compared with vLLM 0.33's (status, ``type``,
``param`` and ``message``): the kinds of mistakes clients send to the render, tokenize and derender
routes. Shared by ``tools/record_error_goldens.py`` (records vLLM's answers, diffs a running server
against them) and ``tests/test_error_goldens.py`` (replays the recorded file against ours).

``CASES`` is a list of ``(kind, name, path, body)``; ``kind`` groups the differences the recorder
prints. ``body`` is sent as JSON as is (no ``model``: both servers then use their one model), except
a ``RAW`` body, sent as the bytes given with ``content-type: application/json``.
"""

from __future__ import annotations

from typing import Any

#: The model folder and ``vllm launch render`` flags the errors are recorded with.
FOLDER = "Qwen--Qwen3-0.6B"
FLAGS = ["--reasoning-parser", "qwen3", "--tool-call-parser", "hermes", "--enable-auto-tool-choice"]

CHAT = "/v1/chat/completions/render"
COMPL = "/v1/completions/render"
MSGS = "/v1/messages/render"
RESP = "/v1/responses/render"
TOK = "/tokenize"
DETOK = "/detokenize"
CHAT_DR = "/v1/chat/completions/derender"
COMPL_DR = "/v1/completions/derender"

USER = [{"role": "user", "content": "Hi"}]
TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}


class RAW(bytes):
    """A body sent as these bytes, not JSON-encoded."""


def _chat(**kw: Any) -> dict[str, Any]:
    return {"messages": USER, **kw}


#: The served model name of both servers (vLLM's Messages request requires ``model``).
MODEL = f"../shared/models/{FOLDER}"


def _msgs(**kw: Any) -> dict[str, Any]:
    return {"model": MODEL, "max_tokens": 16, "messages": USER, **kw}


def _resp(**kw: Any) -> dict[str, Any]:
    return {"input": "Hi", **kw}


def _chat_derender(**kw: Any) -> dict[str, Any]:
    choice = {"index": 0, "finish_reason": "stop", "token_ids": [9707]}
    return {
        "chat_request": _chat(),
        "generate_response": {"request_id": "x", "choices": [{**choice, **kw.pop("choice", {})}]},
        **kw,
    }


def _cases() -> list[tuple[str, str, str, Any]]:
    out: list[tuple[str, str, str, Any]] = []

    def add(kind: str, name: str, path: str, body: Any) -> None:
        out.append((kind, name, path, body))

    # --- chat: wrong types / out of range
    for field, value in (
        ("max_tokens", "x"), ("max_tokens", -1), ("max_tokens", 1.5), ("max_tokens", 0),
        ("max_completion_tokens", "x"), ("temperature", "hot"), ("temperature", -1),
        ("top_p", 2), ("top_p", "x"), ("top_k", "x"), ("min_p", 2), ("n", 0), ("n", "x"),
        ("seed", "x"), ("seed", 1.5), ("stop", 5), ("stop", [1]), ("logprobs", "x"),
        ("top_logprobs", -1), ("top_logprobs", "x"), ("presence_penalty", 5), ("frequency_penalty", "x"),
        ("repetition_penalty", 0), ("stream", "x"), ("add_generation_prompt", "x"),
        ("chat_template_kwargs", "x"), ("logit_bias", "x"), ("logit_bias", {"a": 1}),
        ("stop_token_ids", "x"), ("stop_token_ids", ["a"]), ("min_tokens", -1),
        ("skip_special_tokens", "x"), ("prompt_logprobs", "x"), ("user", 5),
        ("parallel_tool_calls", "x"), ("echo", "x"), ("priority", "x"),
    ):
        add("chat_field", f"chat_{field}_{value!r}", CHAT, _chat(**{field: value}))
    # --- chat: messages
    add("chat_messages", "messages_missing", CHAT, {})
    add("chat_messages", "messages_string", CHAT, {"messages": "x"})
    add("chat_messages", "messages_object", CHAT, {"messages": {}})
    add("chat_messages", "messages_int_item", CHAT, {"messages": [1]})
    add("chat_messages", "messages_empty", CHAT, {"messages": []})
    add("chat_messages", "message_no_role", CHAT, {"messages": [{"content": "Hi"}]})
    add("chat_messages", "message_role_int", CHAT, {"messages": [{"role": 5, "content": "Hi"}]})
    add("chat_messages", "message_no_content", CHAT, {"messages": [{"role": "user"}]})
    add("chat_messages", "message_content_int", CHAT, {"messages": [{"role": "user", "content": 5}]})
    add("chat_messages", "message_content_dict", CHAT, {"messages": [{"role": "user", "content": {}}]})
    add("chat_messages", "tool_message_no_id", CHAT,
        {"messages": [*USER, {"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "content": "1"}]})
    add("chat_messages", "assistant_tool_calls_string", CHAT,
        {"messages": [*USER, {"role": "assistant", "tool_calls": "x"}]})
    add("chat_messages", "history_call_no_function", CHAT,
        {"messages": [*USER, {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function"}]}]})
    add("chat_messages", "history_call_arguments_int", CHAT,
        {"messages": [*USER, {"role": "assistant", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": 5}}]}]})
    add("chat_messages", "history_call_no_id", CHAT,
        {"messages": [*USER, {"role": "assistant", "tool_calls": [
            {"type": "function", "function": {"name": "f", "arguments": "{}"}}]}]})
    # --- chat: content parts
    for name, part in (
        ("unknown_type", {"type": "bogus"}),
        ("no_type", {"text": "Hi"}),
        ("text_missing", {"type": "text"}),
        ("text_int", {"type": "text", "text": 5}),
        ("part_string", "Hi"),
        ("image_url_int", {"type": "image_url", "image_url": 5}),
        ("image_url_no_url", {"type": "image_url", "image_url": {}}),
    ):
        add("chat_content_part", f"part_{name}", CHAT, {"messages": [{"role": "user", "content": [part]}]})
    # --- chat: tools and tool_choice
    for name, tools in (
        ("string", "x"),
        ("object", {}),
        ("no_function", [{"type": "function"}]),
        ("no_name", [{"type": "function", "function": {}}]),
        ("name_int", [{"type": "function", "function": {"name": 5}}]),
        ("parameters_string", [{"type": "function", "function": {"name": "f", "parameters": "x"}}]),
        ("type_bogus", [{"type": "bogus", "function": {"name": "f"}}]),
    ):
        add("chat_tools", f"tools_{name}", CHAT, _chat(tools=tools))
    for name, choice in (
        ("bogus", "bogus"),
        ("int", 5),
        ("object_no_function", {"type": "function"}),
        ("named_unknown", {"type": "function", "function": {"name": "nope"}}),
        ("named_no_name", {"type": "function", "function": {}}),
    ):
        add("chat_tool_choice", f"tool_choice_{name}", CHAT, _chat(tools=[TOOL], tool_choice=choice))
    add("chat_tool_choice", "tool_choice_named_without_tools", CHAT,
        _chat(tool_choice={"type": "function", "function": {"name": "f"}}))
    add("chat_tool_choice", "tool_choice_required_without_tools", CHAT, _chat(tool_choice="required"))
    # --- chat: response_format and structured outputs
    for name, fmt in (
        ("string", "json"),
        ("bogus_type", {"type": "bogus"}),
        ("no_type", {}),
        ("json_schema_missing", {"type": "json_schema"}),
        ("json_schema_no_name", {"type": "json_schema", "json_schema": {}}),
        ("json_schema_string", {"type": "json_schema", "json_schema": "x"}),
    ):
        add("chat_response_format", f"response_format_{name}", CHAT, _chat(response_format=fmt))
    add("chat_response_format", "structured_outputs_string", CHAT, _chat(structured_outputs="x"))
    add("chat_response_format", "structured_outputs_two", CHAT,
        _chat(structured_outputs={"json": {"type": "object"}, "regex": "a+"}))
    # --- chat: request-level checks that are not pydantic's
    add("chat_checks", "continue_final_and_generation_prompt", CHAT,
        {"messages": [*USER, {"role": "assistant", "content": "Hel"}], "continue_final_message": True})
    add("chat_checks", "stream_options_without_stream", CHAT, _chat(stream_options={"include_usage": True}))
    add("chat_checks", "logprobs_without_top_logprobs_range", CHAT, _chat(logprobs=True, top_logprobs=50))
    add("chat_checks", "kv_transfer_ids_past_vocab", CHAT,
        _chat(kv_transfer_params={"prompt_token_ids": [151936]}))
    add("chat_checks", "n_2_greedy", CHAT, _chat(n=2, temperature=0))
    # --- completions
    add("completion", "completion_prompt_missing", COMPL, {})
    add("completion", "completion_prompt_int", COMPL, {"prompt": 5})
    add("completion", "completion_prompt_empty", COMPL, {"prompt": ""})
    add("completion", "completion_prompt_empty_list", COMPL, {"prompt": []})
    add("completion", "completion_prompt_neg_id", COMPL, {"prompt": [-1]})
    add("completion", "completion_prompt_mixed_list", COMPL, {"prompt": [1, "a"]})
    add("completion", "completion_prompt_nested_bad", COMPL, {"prompt": [[1, "a"]]})
    add("completion", "completion_prompt_dict", COMPL, {"prompt": {}})
    add("completion", "completion_max_tokens_string", COMPL, {"prompt": "Hi", "max_tokens": "x"})
    add("completion", "completion_max_tokens_neg", COMPL, {"prompt": "Hi", "max_tokens": -1})
    add("completion", "completion_echo_string", COMPL, {"prompt": "Hi", "echo": "x"})
    add("completion", "completion_temperature_string", COMPL, {"prompt": "Hi", "temperature": "x"})
    add("completion", "completion_stop_int", COMPL, {"prompt": "Hi", "stop": 5})
    add("completion", "completion_logprobs_string", COMPL, {"prompt": "Hi", "logprobs": "x"})
    add("completion", "completion_suffix_int", COMPL, {"prompt": "Hi", "suffix": 5})
    # --- Anthropic Messages
    add("messages", "msgs_model_missing", MSGS, {"max_tokens": 16, "messages": USER})
    add("messages", "msgs_max_tokens_missing", MSGS, {"model": MODEL, "messages": USER})
    add("messages", "msgs_max_tokens_string", MSGS, _msgs(max_tokens="x"))
    add("messages", "msgs_messages_missing", MSGS, {"model": MODEL, "max_tokens": 16})
    add("messages", "msgs_messages_string", MSGS, _msgs(messages="x"))
    add("messages", "msgs_role_bogus", MSGS, _msgs(messages=[{"role": "bogus", "content": "Hi"}]))
    add("messages", "msgs_content_int", MSGS, _msgs(messages=[{"role": "user", "content": 5}]))
    add("messages", "msgs_block_bogus", MSGS, _msgs(messages=[{"role": "user", "content": [{"type": "bogus"}]}]))
    add("messages", "msgs_block_text_missing", MSGS,
        _msgs(messages=[{"role": "user", "content": [{"type": "text"}]}]))
    add("messages", "msgs_system_int", MSGS, _msgs(system=5))
    add("messages", "msgs_temperature_string", MSGS, _msgs(temperature="x"))
    add("messages", "msgs_tools_no_name", MSGS, _msgs(tools=[{"input_schema": {"type": "object"}}]))
    add("messages", "msgs_tools_string", MSGS, _msgs(tools="x"))
    add("messages", "msgs_tool_choice_bogus", MSGS,
        _msgs(tools=[{"name": "f", "input_schema": {"type": "object"}}], tool_choice={"type": "bogus"}))
    add("messages", "msgs_tool_choice_string", MSGS,
        _msgs(tools=[{"name": "f", "input_schema": {"type": "object"}}], tool_choice="auto"))
    add("messages", "msgs_stop_sequences_string", MSGS, _msgs(stop_sequences="x"))
    add("messages", "msgs_thinking_bogus", MSGS, _msgs(thinking={"type": "bogus"}))
    # --- OpenAI Responses
    add("responses", "resp_input_missing", RESP, {})
    add("responses", "resp_input_int", RESP, {"input": 5})
    add("responses", "resp_input_item_bogus", RESP, {"input": [{"type": "bogus"}]})
    add("responses", "resp_input_message_no_role", RESP, {"input": [{"type": "message", "content": "Hi"}]})
    add("responses", "resp_max_output_tokens_string", RESP, _resp(max_output_tokens="x"))
    add("responses", "resp_temperature_string", RESP, _resp(temperature="x"))
    add("responses", "resp_tools_no_name", RESP, _resp(tools=[{"type": "function"}]))
    add("responses", "resp_tools_string", RESP, _resp(tools="x"))
    add("responses", "resp_tool_choice_bogus", RESP,
        _resp(tools=[{"type": "function", "name": "f", "parameters": {}}], tool_choice="bogus"))
    add("responses", "resp_text_format_bogus", RESP, _resp(text={"format": {"type": "bogus"}}))
    add("responses", "resp_reasoning_effort_bogus", RESP, _resp(reasoning={"effort": "bogus"}))
    add("responses", "resp_instructions_int", RESP, _resp(instructions=5))
    # --- SamplingParams checks found by the newcomer check of stop 21 (vLLM 0.33 `_verify_args`)
    add("chat_field", "min_tokens_above_max_tokens", CHAT, _chat(min_tokens=100, max_tokens=10))
    add("chat_field", "min_tokens_above_max_completion_tokens", CHAT,
        _chat(min_tokens=100, max_completion_tokens=10))
    add("chat_field", "stop_empty_string_in_list", CHAT, _chat(stop=["", "x"]))
    add("chat_field", "stop_empty_string", CHAT, _chat(stop=""))
    add("chat_field", "bad_words_empty_string", CHAT, _chat(bad_words=[""]))
    add("completion", "completion_min_tokens_above_max_tokens", COMPL,
        {"prompt": "Hi", "min_tokens": 5, "max_tokens": 1})
    add("completion", "completion_min_tokens_above_default_16", COMPL, {"prompt": "Hi", "min_tokens": 20})
    add("completion", "completion_stop_empty_string", COMPL, {"prompt": "Hi", "stop": [""]})
    add("messages", "msgs_stop_sequences_empty_string", MSGS, _msgs(stop_sequences=[""]))
    # --- Responses text.format: the OpenAI SDK's union (name and schema required for json_schema)
    add("responses", "resp_text_format_json_schema_bare", RESP, _resp(text={"format": {"type": "json_schema"}}))
    add("responses", "resp_text_format_json_schema_no_name", RESP,
        _resp(text={"format": {"type": "json_schema", "schema": {}}}))
    add("responses", "resp_text_format_empty", RESP, _resp(text={"format": {}}))
    add("responses", "resp_text_format_string", RESP, _resp(text={"format": "x"}))
    # --- /tokenize
    add("tokenize", "tok_empty", TOK, {})
    add("tokenize", "tok_prompt_int", TOK, {"prompt": 5})
    add("tokenize", "tok_add_special_tokens_string", TOK, {"prompt": "Hi", "add_special_tokens": "x"})
    add("tokenize", "tok_return_token_strs_string", TOK, {"prompt": "Hi", "return_token_strs": "x"})
    add("tokenize", "tok_messages_string", TOK, {"messages": "x"})
    add("tokenize", "tok_messages_no_role", TOK, {"messages": [{"content": "Hi"}]})
    add("tokenize", "tok_both", TOK, {"prompt": "Hi", "messages": USER})
    add("tokenize", "tok_messages_add_generation_prompt_string", TOK, {"messages": USER, "add_generation_prompt": "x"})
    # --- /detokenize
    add("detokenize", "detok_empty", DETOK, {})
    add("detokenize", "detok_tokens_string", DETOK, {"tokens": "x"})
    add("detokenize", "detok_tokens_neg", DETOK, {"tokens": [-1]})
    add("detokenize", "detok_tokens_str_item", DETOK, {"tokens": ["a"]})
    add("detokenize", "detok_tokens_float", DETOK, {"tokens": [1.5]})
    add("detokenize", "detok_tokens_true", DETOK, {"tokens": [True]})
    add("detokenize", "detok_tokens_nested", DETOK, {"tokens": [[1]]})
    add("detokenize", "detok_past_vocab", DETOK, {"tokens": [9707, 151936]})
    add("detokenize", "detok_many_bad", DETOK, {"tokens": ["a"] * 12})
    # --- chat derender
    add("derender", "dr_empty", CHAT_DR, {})
    add("derender", "dr_generate_response_missing", CHAT_DR, {"chat_request": _chat()})
    add("derender", "dr_chat_request_missing", CHAT_DR,
        {"generate_response": _chat_derender()["generate_response"]})
    add("derender", "dr_choices_string", CHAT_DR, {**_chat_derender(), "generate_response": {"choices": "x"}})
    add("derender", "dr_token_ids_string", CHAT_DR, _chat_derender(choice={"token_ids": "x"}))
    add("derender", "dr_token_ids_neg", CHAT_DR, _chat_derender(choice={"token_ids": [-1]}))
    add("derender", "dr_token_ids_str_item", CHAT_DR, _chat_derender(choice={"token_ids": ["a"]}))
    add("derender", "dr_finish_reason_int", CHAT_DR, _chat_derender(choice={"finish_reason": 5}))
    add("derender", "dr_chat_request_messages_string", CHAT_DR, _chat_derender(chat_request={"messages": "x"}))
    add("derender", "dr_prompt_token_ids_string", CHAT_DR, _chat_derender(prompt_token_ids="x"))
    add("derender", "dr_stream_no_chunk", CHAT_DR, {"stream": True, "chat_request": _chat()})
    add("derender", "compl_dr_empty", COMPL_DR, {})
    add("derender", "compl_dr_responses_string", COMPL_DR, {"generate_responses": "x"})
    # --- bodies that are not a JSON object
    add("body", "chat_body_list", CHAT, [])
    add("body", "chat_body_not_json", CHAT, RAW(b"{"))
    add("body", "tok_body_list", TOK, [])
    add("body", "detok_body_string", DETOK, "x")
    add("body", "compl_body_list", COMPL, [])
    add("body", "msgs_body_list", MSGS, [])
    add("body", "resp_body_list", RESP, [])
    add("body", "dr_body_list", CHAT_DR, [])
    add("body", "compl_dr_body_list", COMPL_DR, [])
    add("body", "tok_body_not_json", TOK, RAW(b'{"prompt": '))
    add("body", "chat_body_nan", CHAT, RAW(b'{"messages": [{"role": "user", "content": "Hi"}], "temperature": NaN}'))
    return out


CASES = _cases()
