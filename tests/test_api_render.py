"""Anthropic Messages and OpenAI Responses render: equal to vLLM 0.33's ``/v1/messages/render``
and ``/v1/responses/render`` (goldens recorded by ``tools/record_api_render_goldens.py``), and
lossless against the chat form of the same conversation for the real requests of
../shared/data/chat_requests.jsonl (Qwen3, qwen3 + hermes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from api_forms import load_chat_requests, to_anthropic, to_responses
from conftest import shared_bundle, shared_path
from pydantic import ValidationError
from render_helpers import bundle_for, settings_for

from render_service.errors import RenderServiceError
from render_service.render import render_chat, render_messages, render_responses
from render_service.settings import Settings

QWEN3 = "Qwen--Qwen3-0.6B"
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
GOLDENS = json.loads((Path(__file__).parent / "data" / "api_render_goldens.json").read_text(encoding="utf-8"))
# Where we answer differently on purpose (README, "Deliberate differences"): vLLM ignores
# non-function Responses tools silently; we refuse them.
DELIBERATE_STATUS = {"r_web_search": 400}
SAMPLING_KEYS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "thinking_token_budget",
    "skip_special_tokens",
    "presence_penalty",
    "frequency_penalty",
    "repetition_penalty",
    "extra_args",
)


GPT_OSS_GOLDENS = json.loads(
    (Path(__file__).parent / "data" / "api_render_goldens_gptoss.json").read_text(encoding="utf-8")
)
#: gpt-oss Responses cases where we still differ (README, "Deliberate differences").
GPT_OSS_KNOWN_DIFFERENT: set[str] = set()  # none left (g_empty_assistant: the empty final message kept)


@pytest.fixture(scope="module")
def qwen3():
    return bundle_for(QWEN3), settings_for(QWEN3, **PARSERS)


def _render(bundle, settings, path, body):
    fn = render_messages if path == "/v1/messages/render" else render_responses
    return fn(bundle, settings, {**body, "model": bundle.names[0]})


@pytest.mark.parametrize("golden", GOLDENS, ids=[g["name"] for g in GOLDENS])
def test_equals_vllm(qwen3, golden):
    bundle, settings = qwen3
    want = DELIBERATE_STATUS.get(golden["name"], golden["status"])
    if want != 200:
        with pytest.raises((RenderServiceError, ValidationError)):
            _render(bundle, settings, golden["path"], golden["request"])
        return
    out = _render(bundle, settings, golden["path"], golden["request"])
    assert out["token_ids"] == golden["token_ids"]
    sp, ref = out["sampling_params"], golden["sampling_params"]
    assert {k: sp.get(k) for k in SAMPLING_KEYS} == {k: ref.get(k) for k in SAMPLING_KEYS}
    if "max_tokens" in golden["request"] or "max_output_tokens" in golden["request"]:
        assert sp["max_tokens"] == ref["max_tokens"]
    if golden["path"] == "/v1/responses/render":
        assert out["request_id"].startswith("resp_") and out["parse_context"] is None
        schema = (ref.get("structured_outputs") or {}).get("json")
        if schema is not None:  # text.format; forced tools use the chat render's own constraint
            assert sp["structured_outputs"]["json"] == schema
    else:
        assert out["request_id"].startswith("chatcmpl-")


def test_error_shapes(qwen3):
    bundle, settings = qwen3
    with pytest.raises(RenderServiceError) as info:
        _render(bundle, settings, "/v1/responses/render", {"input": "Hi", "previous_response_id": "resp_1"})
    assert info.value.error_type == "invalid_request_error" and info.value.param == "previous_response_id"
    image = {
        "max_tokens": 10,
        "messages": [
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [{"type": "image", "source": {"type": "url", "url": "http://x/y.png"}}],
                    }
                ],
            }
        ],
    }
    with pytest.raises(RenderServiceError) as info:  # a text-only model: the chat render's 400,
        _render(bundle, settings, "/v1/messages/render", image)  # in the terms the client sent
    assert info.value.message.startswith("content part type 'image' is not supported")
    assert info.value.param == "messages.0.content.0.content.0.type" and info.value.status_code == 400
    with pytest.raises(RenderServiceError) as info:
        _render(
            bundle,
            settings,
            "/v1/responses/render",
            {"input": [{"type": "reasoning", "encrypted_content": "x"}]},
        )
    assert info.value.param == "input.0"


def test_real_requests_render_like_their_chat_form(qwen3):
    """Every real request that both APIs can express renders to the chat form's token ids."""
    bundle, settings = qwen3
    rows = load_chat_requests(shared_path("data", "chat_requests.jsonl"))
    compared = 0
    for row in rows[::2]:  # every other request keeps the test fast; all 745 agreed when written
        chat = row["chat"]
        forms = [("/v1/messages/render", to_anthropic(chat)), ("/v1/responses/render", to_responses(chat))]
        if any(body is None for _, body in forms):
            continue
        ref = render_chat(bundle, settings, {**chat, "model": bundle.names[0]})["token_ids"]
        for path, body in forms:
            assert _render(bundle, settings, path, body)["token_ids"] == ref, (row["id"], path)
        compared += 1
    assert compared >= 300  # 324 of 373 today: the rest have mid-conversation system/developer turns


def test_disabled_thinking_effort_flag(qwen3):
    """``thinking.type=disabled`` → ``reasoning_effort`` from --anthropic-disabled-thinking-effort;
    ``auto`` resolves to ``none`` for Qwen3 (its template turns thinking off for it)."""
    bundle, _ = qwen3
    body = {
        "max_tokens": 10,
        "messages": [{"role": "user", "content": "Hi"}],
        "thinking": {"type": "disabled"},
    }
    auto = _render(bundle, settings_for(QWEN3, **PARSERS), "/v1/messages/render", body)
    low = _render(
        bundle,
        settings_for(QWEN3, anthropic_disabled_thinking_effort="low", **PARSERS),
        "/v1/messages/render",
        body,
    )
    text = bundle.tokenizer.decode(auto["token_ids"])
    assert text.endswith("<think>\n\n</think>\n\n") and auto["reasoning_ended"] is True
    assert not bundle.tokenizer.decode(low["token_ids"]).endswith("</think>\n\n")


def test_image_blocks_render_as_the_chat_form_on_a_vision_model():
    """An Anthropic image block (base64 source) renders the same token ids and media hashes as the
    chat request with the same image as a data: URL (vLLM ``_convert_image_source_to_url``); an
    image inside a tool_result follows the tool message as a user message, as vLLM."""
    import base64

    from render_service.protocol.anthropic import AnthropicMessagesRequest
    from render_service.render.anthropic import to_chat_request

    folder = "Qwen--Qwen3-VL-2B-Instruct"
    bundle, settings = bundle_for(folder), settings_for(folder)
    data = base64.b64encode(shared_path("data", "media", "rgb_28x28.png").read_bytes()).decode()
    block = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
    part = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{data}"}}
    text = {"type": "text", "text": "What is it?"}
    ours = _render(bundle, settings, "/v1/messages/render",
                   {"max_tokens": 10, "messages": [{"role": "user", "content": [block, text]}]})
    chat = render_chat(bundle, settings, {"model": bundle.names[0], "max_tokens": 10,
                                          "messages": [{"role": "user", "content": [part, text]}]})
    assert ours["token_ids"] == chat["token_ids"]
    assert ours["features"]["mm_hashes"] == chat["features"]["mm_hashes"]
    request = AnthropicMessagesRequest.model_validate(
        {"model": "m", "max_tokens": 10,
         "messages": [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                    "content": [{"type": "text", "text": "seen"}, block]}]}]}
    )
    converted = to_chat_request(request, merge_system=False, disabled_effort="none")["messages"]
    assert converted == [{"role": "tool", "tool_call_id": "t1", "content": "seen"},
                         {"role": "user", "content": [part]}]


def test_input_image_parts_render_as_the_chat_image_url():
    """A Responses ``input_image`` (``image_url`` a plain string, vLLM 0.33 ``MM_PARSER_MAP``) goes
    through the chat multimodal render: the same token ids and the same ``features`` (hashes,
    placeholders, processed tensors) as the chat request with that image as ``image_url``; a
    ``file_id`` without a URL is a 400 naming the field as the request has it."""
    import base64

    folder = "Qwen--Qwen3-VL-2B-Instruct"
    bundle, settings = bundle_for(folder), settings_for(folder)
    data = base64.b64encode(shared_path("data", "media", "rgb_28x28.png").read_bytes()).decode()
    url = f"data:image/png;base64,{data}"
    text = "What is it?"
    ours = _render(bundle, settings, "/v1/responses/render", {"instructions": "Be brief.", "input": [
        {"role": "user", "content": [{"type": "input_image", "image_url": url, "detail": "auto"},
                                     {"type": "input_text", "text": text}]}]})
    chat = render_chat(bundle, settings, {"model": bundle.names[0], "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": url}},
                                     {"type": "text", "text": text}]},
    ]})
    assert ours["token_ids"] == chat["token_ids"]
    assert ours["features"] == chat["features"] and ours["features"]["mm_placeholders"]["image"]
    with pytest.raises(RenderServiceError) as info:
        _render(bundle, settings, "/v1/responses/render", {"input": [
            {"role": "user", "content": [{"type": "input_image", "file_id": "file-1", "detail": "auto"}]}]})
    assert info.value.status_code == 400 and info.value.param == "input.0.content.0.file_id"


@pytest.mark.parametrize(
    "golden",
    [
        pytest.param(g, marks=[pytest.mark.xfail(strict=True, reason="README")] if g["name"] in
                     GPT_OSS_KNOWN_DIFFERENT else [])
        for g in GPT_OSS_GOLDENS
    ],
    ids=[g["name"] for g in GPT_OSS_GOLDENS],
)
def test_gpt_oss_responses_equal_vllm_harmony_render(golden):
    """gpt-oss Responses requests render as vLLM 0.33 renders them through harmony
    (``_render_responses_with_harmony``: items kept in order, every reasoning text, the whole
    assistant message, a ``function_call_output`` without its call a 400), recorded by
    ``tools/record_api_render_goldens.py --config gptoss``."""
    from test_render_goldens import _settings  # the render goldens' gpt-oss server (bundle shared)

    settings = Settings(**_settings("gptoss"))
    bundle = shared_bundle(settings)
    if golden["status"] != 200:
        with pytest.raises((RenderServiceError, ValidationError)) as info:
            _render(bundle, settings, golden["path"], golden["request"])
        assert getattr(info.value, "status_code", 400) == golden["status"]
        return
    out = _render(bundle, settings, golden["path"], golden["request"])
    assert out["token_ids"] == golden["token_ids"], bundle.tokenizer.decode(out["token_ids"])
    sp, ref = out["sampling_params"], golden["sampling_params"]
    assert {k: sp.get(k) for k in (*SAMPLING_KEYS, "max_tokens")} == {
        k: ref.get(k) for k in (*SAMPLING_KEYS, "max_tokens")}


def test_converted_request_errors_name_what_the_client_sent(serve):
    """A 400 the chat render raises for a converted Messages / Responses request names the field
    and part type the client sent, not the chat form's (system and instructions shift the chat
    message indices; an Anthropic ``image`` block is a chat ``image_url`` part)."""
    client = serve(**PARSERS)
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}}
    body = {"model": "Qwen/Qwen3-0.6B", "max_tokens": 8, "system": "Be brief.", "messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, image]}]}
    error = client.post("/v1/messages/render", json=body).json()["error"]
    assert error["param"] == "messages.2.content.1.type", error
    assert error["message"].startswith("content part type 'image' is not supported")
    body = {"model": "Qwen/Qwen3-0.6B", "instructions": "Be brief.", "input": [
        {"role": "user", "content": "hi"},
        {"role": "user", "content": [{"type": "input_image", "image_url": "http://x/y.png"}]}]}
    error = client.post("/v1/responses/render", json=body).json()["error"]
    assert error["param"] == "input.1.content.0.type", error
    assert error["message"].startswith("content part type 'input_image' is not supported")
