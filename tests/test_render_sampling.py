"""sampling_params of rendered requests: every OpenAI/vLLM field mapped, server defaults from
generation_config.json, max_tokens resolution and the stop-string policy."""

from __future__ import annotations

import pytest
from conftest import examples, shared_bundle
from hypothesis import given, settings
from hypothesis import strategies as st

from render_service import render
from render_service.errors import ContextLengthExceeded
from render_service.settings import Settings

USER = [{"role": "user", "content": "hi"}]
PROMPT_LEN = 9  # Qwen3 "hi" with generation prompt
#: vLLM 0.33 sends ``structured_outputs`` as its whole ``StructuredOutputsParams``, every unset
#: field ``null`` / ``false`` (tests/goldens/render_qwen3.json, recorded from vLLM).
UNSET_SO = {"_backend": None, "_backend_was_auto": False, "choice": None,
            "disable_additional_properties": False, "disable_any_whitespace": False, "grammar": None,
            "json": None, "json_object": None, "regex": None, "structural_tag": None,
            "whitespace_pattern": None}


@pytest.fixture(scope="module")
def qwen():
    """The embedded Qwen3 bundle and default settings."""
    s = Settings()
    return shared_bundle(s), s


def sp_of(qwen, settings=None, **body):
    """sampling_params of a chat render."""
    bundle, s = qwen
    return render.render_chat(bundle, settings or s, {"messages": USER, **body})["sampling_params"]


def test_every_field_is_mapped(qwen):
    """Each request sampling field appears under its engine name."""
    sp = sp_of(
        qwen,
        temperature=0.1,
        top_p=0.5,
        top_k=5,
        min_p=0.2,
        presence_penalty=0.3,
        frequency_penalty=-0.4,
        repetition_penalty=1.2,
        seed=7,
        n=2,
        stop_token_ids=[5],
        ignore_eos=True,
        min_tokens=3,
        logprobs=True,
        top_logprobs=4,
        prompt_logprobs=2,
        logit_bias={"11": 1.5},
        allowed_token_ids=[1, 2],
        bad_words=["x"],
        skip_special_tokens=False,
        spaces_between_special_tokens=False,
        include_stop_str_in_output=True,
        vllm_xargs={"k": "v"},
        thinking_token_budget=64,
        max_tokens=100,
        structured_outputs={"regex": "a+"},
    )
    assert sp == {
        "presence_penalty": 0.3,
        "frequency_penalty": -0.4,
        "repetition_penalty": 1.2,
        "temperature": 0.1,
        "top_p": 0.5,
        "min_p": 0.2,
        "n": 2,
        "top_k": 5,
        "seed": 7,
        "ignore_eos": True,
        "min_tokens": 3,
        "logprobs": 4,
        "prompt_logprobs": 2,
        "spaces_between_special_tokens": False,
        "include_stop_str_in_output": True,
        "logit_bias": {"11": 1.5},
        "allowed_token_ids": [1, 2],
        "thinking_token_budget": 64,
        "structured_outputs": {**UNSET_SO, "regex": "a+"},
        "extra_args": {"k": "v"},
        "skip_special_tokens": False,
        "stop": [],
        "stop_token_ids": [5],
        "max_tokens": 100,
        "output_kind": 2,
        "skip_clone": True,
        "bad_words": ["x"],
        "skip_reading_prefix_cache": True,  # prompt_logprobs set (vLLM, tests/goldens)
    }


def test_generation_config_defaults_and_openai_defaults(qwen):
    """Omitted fields take generation_config.json values; --generation-config vllm ignores them."""
    sp = sp_of(qwen)
    assert (sp["temperature"], sp["top_p"], sp["top_k"], sp["repetition_penalty"]) == (0.6, 0.95, 20, 1.0)
    s = Settings(generation_config="vllm")
    sp = render.render_chat(shared_bundle(s), s, {"messages": USER})["sampling_params"]
    assert (sp["temperature"], sp["top_p"], "top_k" in sp) == (1.0, 1.0, False)


def test_chat_logprobs_without_top_is_zero(qwen):
    """``logprobs: true`` alone asks for the sampled token's logprob only (0 alternatives)."""
    assert sp_of(qwen, logprobs=True)["logprobs"] == 0
    assert "logprobs" not in sp_of(qwen)


def test_response_format_to_structured_outputs(qwen):
    """response_format json_object / json_schema become structured_outputs."""
    assert sp_of(qwen, response_format={"type": "json_object"})["structured_outputs"] == {
        **UNSET_SO, "json_object": True}
    schema = {"type": "object"}
    so = sp_of(qwen, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    assert so["structured_outputs"] == {**UNSET_SO, "json": schema}
    assert "structured_outputs" not in sp_of(qwen, response_format={"type": "text"})


@settings(max_examples=examples(50), deadline=None)
@given(
    requested=st.one_of(st.none(), st.integers(1, 40960)),
    which=st.sampled_from(["max_tokens", "max_completion_tokens"]),
)
def test_max_tokens_always_emitted(qwen, requested, which):
    """max_tokens is always present (16 included): the request's value when it fits, the room left
    otherwise; a value that does not fit is a 400 naming the sizes."""
    bundle, s = qwen
    body = {"messages": USER, which: requested}
    room = 40960 - PROMPT_LEN
    if requested is not None and requested > room:
        with pytest.raises(ContextLengthExceeded):
            render.render_chat(bundle, s, body)
        return
    sp = render.render_chat(bundle, s, body)["sampling_params"]
    assert sp["max_tokens"] == (requested if requested is not None else room)


def test_max_tokens_16_is_kept(qwen):
    """The upstream bug (16 dropped from the JSON) does not happen here."""
    assert sp_of(qwen, max_tokens=16)["max_tokens"] == 16


def test_max_new_tokens_default(tmp_path):
    """generation_config ``max_new_tokens`` is the default max_tokens (bounded by the room left)."""
    import shutil

    from render_service.settings import EMBEDDED_MODEL_DIR

    folder = tmp_path / "m"
    shutil.copytree(EMBEDDED_MODEL_DIR, folder)
    (folder / "generation_config.json").write_text('{"max_new_tokens": 300, "temperature": 0.5}')
    s = Settings(model=str(folder))
    sp = render.render_chat(shared_bundle(s), s, {"messages": USER})["sampling_params"]
    assert sp["max_tokens"] == 300 and sp["temperature"] == 0.5


def test_stop_strings_policy(qwen):
    """``stop`` strings are left out by default and kept with keep_stop_strings."""
    bundle, _ = qwen
    assert sp_of(qwen, stop=["END"])["stop"] == []
    keep = Settings(keep_stop_strings=True)
    assert sp_of(qwen, keep, stop="END")["stop"] == ["END"]


def test_stream_output_kind(qwen):
    """output_kind is 1 (DELTA) for streams, 2 (FINAL_ONLY) otherwise."""
    assert sp_of(qwen, stream=True)["output_kind"] == 1
    assert sp_of(qwen, stream=False)["output_kind"] == 2


def test_completion_echo_sets_prompt_logprobs(qwen):
    """Completions ``echo`` with ``logprobs`` asks for prompt logprobs too (upstream)."""
    bundle, s = qwen
    out = render.render_completion(bundle, s, {"prompt": "hi", "echo": True, "logprobs": 2})[0][
        "sampling_params"
    ]
    assert out["logprobs"] == 2 and out["prompt_logprobs"] == 2
