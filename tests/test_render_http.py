"""Render endpoints over real HTTP: the GenerateRequest shape, bug-report cases (mode "render" in
../shared/cases/bug_cases.jsonl) and every 4xx path (never a 500)."""

from __future__ import annotations

import json

import pytest
from conftest import model_dir, shared_path

USER = [{"role": "user", "content": "hi"}]
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}
PARSERS = dict(reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True)

GENERATE_KEYS = [
    "request_id",
    "token_ids",
    "token_offsets",
    "features",
    "content_parts",
    "sampling_params",
    "model",
    "reasoning_ended",
    "reasoning_parser_kwargs",
    "return_token_ids",
    "output_mode",
    "parse_context",
    "stream",
    "stream_options",
    "cache_salt",
    "priority",
    "kv_transfer_params",
    "ec_transfer_params",
]


def bug_case(case_id: str) -> dict:
    """The input of one bug case."""
    with shared_path("cases", "bug_cases.jsonl").open(encoding="utf-8") as f:
        for line in f:
            case = json.loads(line)
            if case["id"] == case_id:
                return case
    raise KeyError(case_id)


def chat(client, **body):
    """POST a chat render."""
    return client.post("/v1/chat/completions/render", json=body)


def error_of(r, status=400) -> dict:
    """The error object of a response, after checking status and shape."""
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["code"] == status
    return err


def decode(client, ids) -> str:
    """Text of ``ids`` through /detokenize."""
    return client.post("/detokenize", json={"tokens": ids}).json()["prompt"]


def test_chat_render_shape(serve):
    """A plain chat render has every upstream key, in order, with the documented values."""
    client = serve()
    r = chat(
        client,
        messages=USER,
        request_id="abc",
        stream=True,
        stream_options={"include_usage": True},
        cache_salt="s",
        priority=3,
        kv_transfer_params={"do_remote_prefill": True},
    )
    assert r.status_code == 200, r.text
    out = r.json()
    assert list(out) == GENERATE_KEYS
    assert out["request_id"] == "chatcmpl-abc"
    assert out["token_ids"] == [151644, 872, 198, 6023, 151645, 198, 151644, 77091, 198]
    assert out["output_mode"] == "tokens" and out["model"] is None
    assert out["stream"] is True and out["stream_options"] == {
        "include_usage": True,
        "continuous_usage_stats": False,
    }
    assert out["cache_salt"] == "s" and out["priority"] == 3
    assert out["kv_transfer_params"] == {"do_remote_prefill": True}
    assert "extra_args" not in out["sampling_params"]
    assert out["reasoning_ended"] is None and out["reasoning_parser_kwargs"] is None
    assert out["parse_context"] == {
        "tools": None,
        "tool_choice": "none",
        "parallel_tool_calls": True,
        "include_reasoning": True,
        "history_tool_call_cnt": 0,
        # vLLM 0.33's effective kwargs: its --cohere-format default (cmd4) is echoed too
        "chat_template_kwargs": {
            "add_generation_prompt": True,
            "cohere_format": "cmd4",
            "continue_final_message": False,
        },
    }
    sp = out["sampling_params"]
    assert sp["output_kind"] == 1 and sp["skip_clone"] is True
    assert sp["max_tokens"] == 40960 - 9
    assert (sp["temperature"], sp["top_p"], sp["top_k"]) == (0.6, 0.95, 20)  # generation_config.json


def test_request_id_defaults_to_uuid(serve):
    """Without a body request_id the id is ``chatcmpl-<32 hex>``, the hex being the X-Request-Id
    the server answers with (one id in body and header), and streams carry no options."""
    client = serve()
    answers = [chat(client, messages=USER) for _ in range(2)]
    out = answers[0].json()
    assert out["request_id"].startswith("chatcmpl-") and len(out["request_id"]) == 9 + 32
    for answer in answers:
        assert answer.json()["request_id"] == "chatcmpl-" + answer.headers["x-request-id"]
    assert answers[1].json()["request_id"] != out["request_id"]
    resp = client.post("/v1/responses/render", json={"input": "Hi"})  # vLLM's default: resp_<id>
    assert resp.json()["request_id"] == "resp_" + resp.headers["x-request-id"]
    assert (
        out["stream"] is False
        and out["stream_options"] is None
        and out["sampling_params"]["output_kind"] == 2
    )


def test_reasoning_fields_with_parser(serve):
    """With qwen3+hermes: reasoning_ended false while thinking is open, true with
    enable_thinking=false or include_reasoning=false; kwargs echoed; special tokens kept."""
    client = serve(**PARSERS)
    open_ = chat(client, messages=USER).json()
    assert open_["reasoning_ended"] is False
    assert open_["sampling_params"]["skip_special_tokens"] is False
    closed = chat(client, messages=USER, chat_template_kwargs={"enable_thinking": False}).json()
    assert closed["reasoning_ended"] is True
    assert closed["reasoning_parser_kwargs"]["chat_template_kwargs"]["enable_thinking"] is False
    assert decode(client, closed["token_ids"]).endswith("<think>\n\n</think>\n\n")
    hidden = chat(client, messages=USER, include_reasoning=False).json()
    assert hidden["reasoning_ended"] is True and hidden["parse_context"]["include_reasoning"] is False


def test_tools_parse_context_and_history_count(serve):
    """Tools, tool_choice and the history's tool-call count land in parse_context."""
    client = serve(**PARSERS)
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "A"}'},
                },
                {
                    "id": "c2",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "B"}'},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        {"role": "tool", "tool_call_id": "c2", "content": "2"},
    ]
    out = chat(client, messages=msgs, tools=[WEATHER], parallel_tool_calls=False).json()
    ctx = out["parse_context"]
    assert ctx["tools"] == [{"type": "function", "function": {**WEATHER["function"], "description": None}}]
    assert ctx["tool_choice"] == "auto"
    assert ctx["parallel_tool_calls"] is False
    assert ctx["history_tool_call_cnt"] == 2
    text = decode(client, out["token_ids"])
    assert '<tool_call>\n{"name": "get_weather", "arguments": {"city": "A"}}\n</tool_call>' in text


def test_required_and_named_tool_choice_set_json_schema(serve):
    """``required`` / named tool_choice constrain the output: hermes with vLLM's structural tag of
    ``<tool_call>`` calls (exactly one for a named tool; values recorded in tests/goldens)."""
    client = serve(**PARSERS)
    named = chat(
        client,
        messages=USER,
        tools=[WEATHER],
        tool_choice={"type": "function", "function": {"name": "get_weather"}},
    ).json()
    tag = json.loads(named["sampling_params"]["structured_outputs"]["structural_tag"])["format"]
    assert tag["type"] == "tags_with_separator" and tag["stop_after_first"] is True
    assert tag["tags"][0]["begin"] == '<tool_call>\n{"name": "get_weather", "arguments": '
    req = chat(client, messages=USER, tools=[WEATHER], tool_choice="required").json()
    tag = json.loads(req["sampling_params"]["structured_outputs"]["structural_tag"])["format"]
    assert tag["at_least_one"] is True and tag["stop_after_first"] is False


# ----------------------------------------------------------------------------- bug cases


@pytest.mark.parametrize("variant", [0, 1])
def test_br56_empty_tool_calls_and_null_content(serve, variant):
    """BR56: ``tool_calls: []`` renders as plain assistant text; ``content: null`` beside tool calls
    renders (Llama 3.1 template) instead of failing."""
    client = serve(model=model_dir("meta-llama--Llama-3.1-8B-Instruct"))
    msgs = bug_case("BR56")["input"]["variants"][variant]["messages"]
    r = chat(client, messages=msgs)
    assert r.status_code == 200, r.text
    text = decode(client, r.json()["token_ids"])
    if variant == 0:
        assert "<|start_header_id|>assistant<|end_header_id|>\n\nSure.<|eot_id|>" in text
    else:
        assert '{"name": "get_time", "parameters": {"city": "London"}}' in text and "10:00 AM" in text


def test_br53_no_double_bos(serve):
    """BR53: R1-Distill's template writes BOS; tokenizing it must not add a second one."""
    client = serve(model=model_dir("deepseek-ai--DeepSeek-R1-Distill-Qwen-7B"))
    inp = bug_case("BR53")["input"]
    out = chat(client, **inp).json()
    assert out["token_ids"] == bug_case("BR53")["expected"]["prompt_token_ids"]


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content"])
def test_br52_history_reasoning_under_either_name(serve, field):
    """BR52: prior-turn reasoning sent as ``reasoning`` or ``reasoning_content`` reaches the template
    (Qwen3 renders reasoning of assistant turns after the last user query)."""
    client = serve()
    msgs = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": "",
            field: "I should call the tool.",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
    ]
    out = chat(client, messages=msgs).json()
    assert "<think>\nI should call the tool.\n</think>" in decode(client, out["token_ids"])


def test_br58_continue_final_message_with_trailing_whitespace(serve):
    """BR58: continuing a final message that ends in whitespace works on Llama 3.1."""
    client = serve(model=model_dir("meta-llama--Llama-3.1-8B-Instruct"))
    case = bug_case("BR58")
    out = chat(client, **case["input"])
    assert out.status_code == 200, out.text
    text = decode(client, out.json()["token_ids"])
    assert any(text.endswith(e) for e in case["expected"]["rendered_endswith_one_of"])
    assert not text.endswith("<|eot_id|>")
    both = chat(
        client, messages=case["input"]["messages"], continue_final_message=True, add_generation_prompt=True
    )
    assert "add_generation_prompt" in error_of(both)["message"]


def test_br55_tool_result_as_content_parts(serve):
    """BR55: a tool result sent as text parts is rendered as its text, with the model's template and
    with an "openai"-format template (which loops over content parts of other roles)."""
    msgs = bug_case("BR55")["input"]["messages"]
    client = serve()
    text = decode(client, chat(client, messages=msgs).json()["token_ids"])
    assert "<tool_response>\n15°C, partly cloudy\n</tool_response>" in text
    trusted = serve(trust_request_chat_template=True)
    template = (
        "{% for m in messages %}{% if m.content is string %}[{{ m.role }}:{{ m.content }}]"
        "{% else %}{% for p in m.content %}[{{ m.role }}:part:{{ p.text }}]{% endfor %}{% endif %}"
        "{% endfor %}"
    )
    out = chat(trusted, messages=msgs[:1] + msgs[2:], chat_template=template).json()
    assert decode(trusted, out["token_ids"]) == "[user:part:Weather in Beijing?][tool:15°C, partly cloudy]"


def test_br61_prompt_longer_than_context(serve):
    """BR61: a prompt over max_model_len is a 400 naming both sizes, never a negative max_tokens."""
    client = serve(max_model_len=4096)
    err = error_of(chat(client, messages=[{"role": "user", "content": "word " * 5000}]))
    assert "exceeds model's maximum context length (4096)" in err["message"] and "got -" not in err["message"]
    n = int(err["message"].split("Input length (")[1].split(")")[0])
    assert n > 4096


def test_br61_variant_requested_tokens_do_not_fit(serve):
    """BR61 variant: prompt 8 + max_tokens 2045 > 2048 → 400 naming 2048, 8 and 2045."""
    client = serve(max_model_len=2048)
    r = client.post("/v1/completions/render", json={"prompt": list(range(100, 108)), "max_tokens": 2045})
    msg = error_of(r)["message"]
    assert all(s in msg for s in ("2048", "(8 in the", "2045"))
    ok = client.post("/v1/completions/render", json={"prompt": list(range(100, 108)), "max_tokens": 2040})
    assert ok.json()[0]["sampling_params"]["max_tokens"] == 2040


def test_br62_unknown_role_is_400(serve):
    """BR62: an unknown role (``SYSTEM``) is a 400 mentioning the role, not a 501."""
    err = error_of(chat(serve(), **bug_case("BR62")["input"]))
    assert "role" in err["message"] and err["param"] == "messages.0.role"


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "body,needle,param",
    [
        ({"use_beam_search": True}, "Beam search", "use_beam_search"),
        ({"stream_options": {"include_usage": True}}, "stream=True", "stream_options"),
        # no param, as vLLM 0.33 (render goldens ``r1-tools_auto``)
        ({"tools": [WEATHER]}, '"auto" tool choice requires --enable-auto-tool-choice', None),
        ({"tools": [WEATHER], "tool_choice": "required"}, "requires --tool-call-parser", None),
        (
            {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "nope"}}},
            "does not match",
            "tool_choice",
        ),
        ({"tools": []}, "must not be an empty array", "tools"),
        ({"tool_choice": "required"}, "`tools` must be set", "tool_choice"),
        ({"chat_template": "{{ 1 }}"}, "untrusted chat template", "chat_template"),
        (
            {
                "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
                "xx": 1,
            },
            "text content only",
            "messages.0.content.0.type",
        ),
        (  # a text part whose text is no string is named as such (newcomer finding)
            {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
            "content part of type 'text' needs a string `text`",
            "messages.0.content.0.text",
        ),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "content": None,
                        "tool_calls": [
                            {"id": "a", "function": {"name": "f", "arguments": "{}"}}
                        ],
                    }
                ]
            },
            "ChatCompletionMessageFunctionToolCallParam.type', 'msg': 'Field required'",  # vLLM's dump
            "body.0.ChatCompletionMessageFunctionToolCallParam.type",
        ),
        ({"messages": []}, "Cannot apply chat template to an empty conversation", None),
        ({"top_logprobs": 5}, "logprobs", "top_logprobs"),
        ({"logprobs": True, "top_logprobs": 21}, "max allowed", "top_logprobs"),
        ({"max_tokens": 10**9}, "maximum context length", "max_tokens"),
    ],
)
def test_chat_errors_are_400(serve, body, needle, param):
    """Each bad chat request is a 400 in the upstream shape, with the offending field as param."""
    err = error_of(chat(serve(), **{"messages": USER, **body}))
    # pydantic errors (``param`` a ``body.`` loc) are vLLM's "Bad Request", its own checks "BadRequestError"
    kind = "Bad Request" if param and param.startswith("body.") else "BadRequestError"
    assert needle in err["message"] and err["param"] == param and err["type"] == kind


def test_validation_errors_and_unknown_model(serve):
    """Schema errors are 400 "Bad Request"; an unknown model is the upstream 404."""
    client = serve()
    err = error_of(chat(client, temperature="hot", messages=USER))
    assert err["type"] == "Bad Request"
    err = error_of(chat(client, model="nope", messages=USER), 404)
    assert err["type"] == "NotFoundError" and err["param"] == "model"
    assert error_of(client.post("/v1/chat/completions/render", json=[1, 2]))["code"] == 400


def test_hostile_request_template_is_stopped(serve):
    """A trusted request template that loops forever is stopped by the time budget (400)."""
    client = serve(trust_request_chat_template=True, template_max_seconds=0.3)
    err = error_of(
        chat(
            client,
            messages=USER,
            chat_template=(
                "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
            ),
        )
    )
    assert "time budget" in err["message"]


# ----------------------------------------------------------------------------- completions / tokenize


def test_completion_prompt_forms(serve):
    """String, list of strings, ids and id lists each give one GenerateRequest per prompt."""
    client = serve()
    one = client.post("/v1/completions/render", json={"prompt": "hello world", "request_id": "q"}).json()
    assert len(one) == 1 and one[0]["request_id"] == "cmpl-q" and one[0]["token_ids"] == [14990, 1879]
    assert one[0]["sampling_params"]["max_tokens"] == 16 and one[0]["parse_context"] is None
    many = client.post("/v1/completions/render", json={"prompt": ["a", "b"], "request_id": "q"}).json()
    assert [g["request_id"] for g in many] == ["cmpl-q-0", "cmpl-q-1"]
    ids = client.post("/v1/completions/render", json={"prompt": [1, 2, 3]}).json()
    assert ids[0]["token_ids"] == [1, 2, 3]
    lists = client.post("/v1/completions/render", json={"prompt": [[1], [2, 3]], "max_tokens": 5}).json()
    assert [g["token_ids"] for g in lists] == [[1], [2, 3]] and lists[1]["sampling_params"]["max_tokens"] == 5


def test_completion_add_special_tokens_adds_bos(serve):
    """Text prompts get the tokenizer's BOS by default and not with add_special_tokens=false."""
    client = serve(model=model_dir("meta-llama--Llama-3.1-8B-Instruct"))
    on = client.post("/v1/completions/render", json={"prompt": "Hi"}).json()[0]["token_ids"]
    off = client.post("/v1/completions/render", json={"prompt": "Hi", "add_special_tokens": False}).json()
    assert on[0] == 128000 and on[1:] == off[0]["token_ids"]


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"prompt": [1, 10**7]}, "out of vocabulary"),
        ({"prompt": [[1], [-1]]}, "greater_than_equal"),  # vLLM's list[list[NonNegativeInt]]
        ({"prompt": "x", "suffix": "y"}, "suffix"),
        ({"prompt": []}, "You must pass at least one prompt"),
        ({"prompt": ""}, "empty"),
        ({"prompt": "x", "use_beam_search": True}, "Beam search"),
        ({"prompt": "x", "logprobs": 99}, "max allowed"),
        ({"prompt": "x", "prompt_embeds": "abc"}, "prompt_embeds"),
    ],
)
def test_completion_errors_are_400(serve, body, needle):
    """Bad completions requests are 400s."""
    assert needle in error_of(serve().post("/v1/completions/render", json=body))["message"]


def test_tokenize_and_detokenize(serve):
    """/tokenize handles prompts and chat messages (same ids as render); /detokenize inverts."""
    client = serve()
    t = client.post("/tokenize", json={"prompt": "hello world", "return_token_strs": True}).json()
    assert t == {
        "count": 2,
        "max_model_len": 40960,
        "tokens": [14990, 1879],
        "token_strs": ["hello", "Ġworld"],
    }
    c = client.post("/tokenize", json={"messages": USER}).json()
    assert c["tokens"] == chat(client, messages=USER).json()["token_ids"] and c["token_strs"] is None
    assert client.post("/detokenize", json={"tokens": [14990, 1879]}).json() == {"prompt": "hello world"}
    # vLLM 0.33: ids past the vocabulary are dropped, ids past 63 bits and fractions are refused
    assert client.post("/detokenize", json={"tokens": [10**8]}).json() == {"prompt": ""}
    assert error_of(client.post("/detokenize", json={"tokens": [2**63]}))["param"] == "body.tokens.0"
    huge = error_of(client.post("/detokenize", content=b'{"tokens": [1208925819614629174706176]}'))
    assert huge["param"] == "body.tokens.0"
    assert "int_from_float" in error_of(client.post("/detokenize", json={"tokens": [1.5]}))["message"]
    assert error_of(client.post("/tokenize", json={}))["code"] == 400


def test_forwarded_prompt_token_ids_and_offsets(serve):
    """``kv_transfer_params.prompt_token_ids`` (decode-side reuse) replaces templating (validated);
    ``return_token_offsets`` gives each id's character span in the rendered prompt."""
    client = serve()
    out = chat(client, messages=USER, kv_transfer_params={"prompt_token_ids": [1, 2, 3]}).json()
    assert out["token_ids"] == [1, 2, 3] and out["token_offsets"] is None
    bad = chat(client, messages=USER, kv_transfer_params={"prompt_token_ids": [10**9]})
    assert error_of(bad)["param"] == "kv_transfer_params.prompt_token_ids"
    spans = chat(client, messages=USER, return_token_offsets=True).json()["token_offsets"]
    assert spans[:4] == [[0, 12], [12, 16], [16, 17], [17, 19]]


def test_template_kwargs_merge_and_reasoning_effort(serve):
    """Request chat_template_kwargs win over --default-chat-template-kwargs; reasoning_effort reaches
    the template (gpt-oss writes it into the system message) and parse_context."""
    client = serve(default_chat_template_kwargs={"enable_thinking": False, "x": 1})
    out = chat(client, messages=USER, chat_template_kwargs={"enable_thinking": True}).json()
    assert out["parse_context"]["chat_template_kwargs"]["enable_thinking"] is True
    assert out["parse_context"]["chat_template_kwargs"]["x"] == 1
    default = chat(client, messages=USER).json()
    assert decode(client, default["token_ids"]).endswith("<think>\n\n</think>\n\n")
    oss = serve(model=model_dir("openai--gpt-oss-20b"))
    out = chat(oss, messages=USER, reasoning_effort="high").json()
    assert "Reasoning: high" in decode(oss, out["token_ids"])
    assert out["parse_context"]["chat_template_kwargs"] == {}  # harmony: parsed without kwargs (vLLM)


def test_real_client_leftovers_render(serve):
    """``developer`` role, ``function_call: null``, ``content: null`` on user turns and the
    ``name`` on tool messages are accepted as real clients send them."""
    client = serve()
    msgs = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": None},
        {"role": "assistant", "content": "ok", "function_call": None, "tool_calls": None},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
    ]
    r = chat(client, messages=msgs)
    assert r.status_code == 200, r.text
    assert "<|im_start|>user\na\nb<|im_end|>" in decode(client, r.json()["token_ids"])


def test_real_requests_over_http_match_transformers(serve):
    """Twenty real requests with tools, through the HTTP route with qwen3+hermes configured, give
    transformers' ids for the normalised conversation."""
    from render_helpers import bundle_for, reference_ids

    from render_service.render import chat_prompt, messages
    from render_service.settings import Settings

    client = serve(model=model_dir("Qwen--Qwen3-0.6B"), **PARSERS)
    bundle = bundle_for("Qwen--Qwen3-0.6B")
    with shared_path("data", "chat_requests.jsonl").open(encoding="utf-8") as f:
        records = [r for r in map(json.loads, f) if r.get("tools")][::15][:20]
    for rec in records:
        out = chat(
            client,
            messages=rec["messages"],
            tools=rec["tools"],
            chat_template_kwargs=rec.get("chat_template_kwargs"),
        )
        assert out.status_code == 200, (rec["id"], out.text)
        conv = chat_prompt.conversation(bundle.compiled_template, Settings(), rec["messages"])
        tools = messages.validate_tools(rec["tools"])
        ref = reference_ids(bundle, conv, tools, rec.get("chat_template_kwargs") or {})
        assert out.json()["token_ids"] == ref, rec["id"]


def test_tools_take_vllm_shape(serve):
    """Tools reach the template and parse_context in vLLM's shape: unknown keys (BFCL's
    ``response``) dropped, absent description/parameters as null, ``strict`` kept in parse_context when given
    (not in the prompt: test_tool_fields_prompt.py)."""
    client = serve(**PARSERS)
    tools = [
        {"type": "function", "function": {"name": "a", "response": {"x": 1}}, "extra": 2},
        {"function": {"name": "b", "description": "d", "parameters": {"type": "object"}, "strict": True}},
    ]
    out = chat(client, messages=USER, tools=tools).json()
    assert out["parse_context"]["tools"] == [
        {"type": "function", "function": {"name": "a", "description": None, "parameters": None}},
        {
            "type": "function",
            "function": {"name": "b", "description": "d", "parameters": {"type": "object"}, "strict": True},
        },
    ]
    text = decode(client, out["token_ids"])
    assert '{"type": "function", "function": {"name": "a", "description": null, "parameters": null}}' in text
    bad = chat(
        client, messages=USER, tools=[{"type": "function", "function": {"name": "a", "parameters": "x"}}]
    )
    assert error_of(bad)["param"] == "body.tools.0.function.parameters"  # vLLM's pydantic loc


def test_developer_role_becomes_system_where_template_lacks_it(serve):
    """Qwen3's template has no developer role: developer messages render as the system message,
    merged with other system messages into the first one (vLLM 0.33 behaviour)."""
    client = serve()
    msgs = [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": "hi"},
        {"role": "system", "content": "Late rule."},
        {"role": "user", "content": "again"},
    ]
    text = decode(client, chat(client, messages=msgs).json()["token_ids"])
    assert text.startswith("<|im_start|>system\nBe brief.\n\nLate rule.<|im_end|>\n<|im_start|>user\nhi")
    oss = serve(model=model_dir("openai--gpt-oss-20b"))
    text = decode(oss, chat(oss, messages=msgs[:2]).json()["token_ids"])
    assert "<|start|>developer<|message|># Instructions\n\nBe brief." in text


def test_content_format_and_tool_exclusion_flags(serve):
    """--chat-template-content-format openai gives parts to the template; with
    --exclude-tools-when-tool-choice-none a ``tool_choice: none`` request renders without tools."""
    template = (
        "{% for m in messages %}{% for p in m.content %}<{{ p.text }}>{% endfor %}{% endfor %}{{ tools }}"
    )
    client = serve(trust_request_chat_template=True, chat_template_content_format="openai")
    out = chat(client, messages=[{"role": "user", "content": "a"}], chat_template=template).json()
    assert decode(client, out["token_ids"]) == "<a>None"
    tools_client = serve(exclude_tools_when_tool_choice_none=True)
    text = decode(
        tools_client,
        chat(tools_client, messages=USER, tools=[WEATHER], tool_choice="none").json()["token_ids"],
    )
    assert "<tools>" not in text
    text = decode(
        client, chat(serve(), messages=USER, tools=[WEATHER], tool_choice="none").json()["token_ids"]
    )
    assert "<tools>" in text


def test_truncate_prompt_tokens(serve):
    """``truncate_prompt_tokens`` keeps the last N ids (or the first N with truncation_side right);
    -1 means max_model_len; a prompt then fits that would not have."""
    client = serve(max_model_len=64)
    ids = list(range(100, 200))
    left = client.post("/v1/completions/render", json={"prompt": ids, "truncate_prompt_tokens": 10}).json()[0]
    assert left["token_ids"] == ids[-10:]
    right = client.post(
        "/v1/completions/render",
        json={"prompt": ids, "truncate_prompt_tokens": 10, "truncation_side": "right"},
    ).json()[0]
    assert right["token_ids"] == ids[:10]
    full = chat(
        client, messages=[{"role": "user", "content": "word " * 100}], truncate_prompt_tokens=20
    ).json()
    assert len(full["token_ids"]) == 20 and full["sampling_params"]["max_tokens"] == 44
    err = error_of(client.post("/v1/completions/render", json={"prompt": ids, "truncate_prompt_tokens": -1}))
    assert "maximum context length (64)" in err["message"]


def test_completion_default_max_tokens_is_clamped_not_refused(serve):
    """Completions' implicit default of 16 is cut to the room left (60 of 64 used → 4); an explicit
    16 that does not fit is a 400."""
    client = serve(max_model_len=64)
    out = client.post("/v1/completions/render", json={"prompt": list(range(100, 160))}).json()[0]
    assert out["sampling_params"]["max_tokens"] == 4
    err = client.post("/v1/completions/render", json={"prompt": list(range(100, 160)), "max_tokens": 16})
    assert "60 in the messages, 16 in the completion" in error_of(err)["message"]


def test_token_ids_up_to_the_model_vocabulary_are_valid(serve):
    """An id the model has an embedding row for but the tokenizer no text (Qwen3: 151,669 tokens,
    ``vocab_size`` 151,936) is a valid prompt id, as vLLM 0.33's ``validate_token_ids`` bounds ids
    by the larger of the two; the first id past the model's vocabulary is refused by the renders
    (vLLM's wording) and dropped by ``/detokenize``, as vLLM 0.33's ``/detokenize`` answers."""
    client = serve()
    rendered = client.post("/v1/completions/render", json={"prompt": [151700, 151935]}).json()
    assert rendered[0]["token_ids"] == [151700, 151935]
    assert client.post("/detokenize", json={"tokens": [9707, 151935]}).json() == {"prompt": "Hello"}
    assert client.post("/detokenize", json={"tokens": [9707, 151936]}).json() == {"prompt": "Hello"}
    for path, body, param in (
        ("/v1/completions/render", {"prompt": [151936]}, "prompt"),
        ("/v1/chat/completions/render",
         {"messages": USER, "kv_transfer_params": {"prompt_token_ids": [151936]}},
         "kv_transfer_params.prompt_token_ids"),
    ):
        error = error_of(client.post(path, json=body))
        assert error["message"] == f"Token id 151936 is out of vocabulary (parameter={param})"
        assert error["param"] == param


BAD_BIAS_KEYS = "logit_bias contains key(s) that cannot be converted to integer token IDs: "


@pytest.mark.parametrize(
    "bias,status,answer",
    [
        # vLLM 0.33 SamplingParams.from_optional: keys through int(), values clamped to [-100, 100]
        ({"5": 1000, " 6": -1000, "+7": 3}, 200, {"5": 100.0, "6": -100.0, "7": 3.0}),
        ({"10000000": 1}, 200, {"10000000": 1.0}),  # the vocabulary bound is the engine's check
        ({"abc": 1, "5": 1}, 400, f"{BAD_BIAS_KEYS}['abc'] (parameter=logit_bias, value=['abc'])"),
        ({"1.5": 1}, 400, f"{BAD_BIAS_KEYS}['1.5'] (parameter=logit_bias, value=['1.5'])"),
    ],
)
def test_logit_bias_keys_and_values_as_vllm(serve, bias, status, answer):
    """``logit_bias`` as vLLM 0.33's render sends it (measured against ``vllm launch render``)."""
    r = chat(serve(), messages=USER, logit_bias=bias)
    if status == 200:
        assert r.status_code == 200, r.text
        assert r.json()["sampling_params"]["logit_bias"] == answer
    else:
        error = error_of(r)
        assert (error["message"], error["param"], error["type"]) == (answer, "logit_bias", "BadRequestError")


@pytest.mark.parametrize(
    "response_format,param,needle",
    [
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": "no object"}},
         "body.response_format.json_schema.schema", "valid dictionary"),
        ({"type": "json_schema", "json_schema": {"name": "x", "schema": [1]}},
         "body.response_format.json_schema.schema", "valid dictionary"),
        ({"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
         "body.response_format.json_schema.name", "Field required"),
        ({"type": "bogus"}, "body.response_format.type", "'text', 'json_object' or 'json_schema'"),
        ({"type": "json_schema", "json_schema": {"name": "x"}}, None,
         "You must use one kind of structured outputs constraint but none are specified"),
        ({"type": "json_schema"}, "response_format", "the 'json_schema' field must be provided"),
        ({"type": "structural_tag"}, "response_format",
         "Invalid response_format structural_tag specification."),
    ],
)
def test_malformed_response_format_is_vllms_400(serve, response_format, param, needle):
    """Each ``response_format`` vLLM 0.33 refuses (its ``ResponseFormat`` pydantic model, the
    structured-outputs constraint check, the structural-tag shape) is a 400 naming the same
    ``param``; the chat derender's ``chat_request`` is checked the same way, as vLLM validates it."""
    client = serve()
    error = error_of(chat(client, messages=USER, response_format=response_format))
    assert error["param"] == param and needle in error["message"], error
    if param is not None and param.startswith("body."):
        derender = client.post("/v1/chat/completions/derender", json={
            "chat_request": {"messages": USER, "response_format": response_format},
            "generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]}})
        # vLLM's body is the union batch | stream: the batch member's name leads the loc
        assert error_of(derender)["param"] == param.replace("body.", "body.DerenderChatRequest.chat_request.")


@pytest.mark.parametrize(
    "extra,param",
    [
        ({"thinking_token_budget": True}, "thinking_token_budget"),
        ({"thinking_token_budget": -5}, "thinking_token_budget"),
        ({"mm_processor_kwargs": "x"}, "mm_processor_kwargs"),
        ({"messages": [{"role": "user", "content": "hi", "name": 5}]}, "messages.0.name"),
        ({"messages": [{"role": "system", "content": "x", "name": None}, *USER]}, "messages.0.name"),
        ({"messages": [*USER, {"role": "tool", "content": "x", "tool_call_id": 5}]},
         "messages.1.tool_call_id"),
    ],
)
def test_fields_vllm_refuses_are_400s(serve, extra, param):
    """Values vLLM 0.33's render refuses (measured) that were accepted here: a boolean or
    below -1 ``thinking_token_budget`` (its ``validate_thinking_token_budget``), an
    ``mm_processor_kwargs`` that is no object, a message ``name`` that is no string, a
    ``tool_call_id`` that is no string (its message types)."""
    error = error_of(chat(serve(), **{"messages": USER, **extra}))
    assert error["param"] == param, error


def test_unlimited_thinking_token_budget_is_sent_unset(serve):
    """``thinking_token_budget: -1`` means unlimited and is left out of ``sampling_params``, as
    vLLM 0.33 sends it; a budget of 0 or more is sent as given."""
    client = serve()
    assert "thinking_token_budget" not in chat(client, messages=USER, thinking_token_budget=-1).json()[
        "sampling_params"]
    assert chat(client, messages=USER, thinking_token_budget=0).json()["sampling_params"][
        "thinking_token_budget"] == 0


def _call(**over):
    call = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    fn = over.pop("function", None)
    if fn is not None:
        call["function"] = {**call["function"], **fn}
    return {**call, **over}


@pytest.mark.parametrize(
    "extra,param",
    [
        ({"structured_outputs": {}}, None),
        ({"structured_outputs": {"disable_any_whitespace": True}}, None),
        ({"truncate_prompt_tokens": 0}, None),
        ({"logprob_token_ids": [5]}, "logprob_token_ids"),
        ({"user": True}, "body.user"),
        ({"length_penalty": {}}, "body.length_penalty"),
        ({"return_tokens_as_token_ids": 1.5}, "body.return_tokens_as_token_ids"),
        ({"add_special_tokens": "x"}, "body.add_special_tokens"),
        # history tool calls: vLLM's loc (the call's index, the SDK call type; ``arguments`` is one
        # of pydantic's internal marker names, so vLLM's cleaning drops it)
        ({"messages": [*USER, {"role": "assistant", "content": None, "tool_calls": [_call(id=1)]}]},
         "body.0.ChatCompletionMessageFunctionToolCallParam.id"),
        ({"messages": [*USER, {"role": "assistant", "tool_calls": [{"type": "function", "function": {
            "name": "f", "arguments": "{}"}}]}]}, "body.0.ChatCompletionMessageFunctionToolCallParam.id"),
        ({"messages": [*USER, {"role": "assistant",
                               "tool_calls": [_call(function={"arguments": {"a": 1}})]}]},
         "body.0.ChatCompletionMessageFunctionToolCallParam.function"),
    ],
)
def test_more_requests_vllm_refuses_are_400s(serve, extra, param):
    """Found by fuzzing mutated real requests against ``vllm launch render`` 0.33, each a 400
    there: a ``structured_outputs`` with no constraint, ``truncate_prompt_tokens: 0`` (nothing
    left), ``logprob_token_ids`` without ``logprobs``, wrongly typed ``user`` /
    ``length_penalty`` / ``return_tokens_as_token_ids`` / ``add_special_tokens``, a history tool
    call without a string ``id`` or with non-string ``arguments``."""
    error = error_of(chat(serve(), **{"messages": USER, **extra}))
    assert error["param"] == param, error


def test_logprob_token_ids_reach_the_engine(serve):
    """``logprob_token_ids`` is sent in ``sampling_params`` and replaces the top-k ``logprobs``
    (vLLM 0.33 ``to_sampling_params``), chat and completions; a non-assistant message's
    ``tool_calls`` is ignored, as vLLM reads tool calls of assistant messages only."""
    client = serve()
    sp = chat(client, messages=USER, logprobs=True, top_logprobs=3, logprob_token_ids=[5, 1]).json()[
        "sampling_params"]
    assert sp["logprob_token_ids"] == [5, 1] and "logprobs" not in sp
    sp = client.post("/v1/completions/render", json={"prompt": "hi", "logprobs": 2,
                                                      "logprob_token_ids": [5]}).json()[0]["sampling_params"]
    assert sp["logprob_token_ids"] == [5] and "logprobs" not in sp
    error = error_of(client.post("/v1/completions/render",
                                 json={"prompt": "hi", "logprob_token_ids": [5]}))
    assert error["message"] == "when using `logprob_token_ids`, `logprobs` must be set."
    stray = chat(client, messages=[{"role": "user", "content": "hi",
                                    "tool_calls": [{"function": {"name": 5}}]}])
    assert stray.status_code == 200
    assert stray.json()["token_ids"] == chat(client, messages=USER).json()["token_ids"]
