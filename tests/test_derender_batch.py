"""Batch and streaming derender details: logprobs, n > 1, completions, usage, token ids."""

from __future__ import annotations

import pytest
from conftest import examples
from derender_helpers import QWEN3, bundle, byte_token_ids, cuts, split, stream_body
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from render_service import derender
from render_service.errors import InvalidRequest
from render_service.settings import Settings


def setup(**kw):
    b = bundle(QWEN3)
    return b, Settings(model=b.root, **kw)


def lp_content(ids, k=3):
    """Engine-style logprobs: sampled first, then k neighbours."""
    return {
        "content": [
            {
                "token_id": t,
                "logprob": -0.5,
                "rank": 1,
                "top_logprobs": [{"token_id": t, "logprob": -0.5, "rank": 1}]
                + [{"token_id": t + j, "logprob": -1.0 - j, "rank": j + 1} for j in range(1, k + 1)],
            }
            for t in ids
        ]
    }


def test_chat_logprobs_strings_bytes_and_cut():
    """Chat logprobs get token strings and true UTF-8 bytes; top_logprobs is cut to the
    requested k; a partial-UTF-8 byte token gets its own byte and its string repaired from
    the preceding ids ('' until the character completes, as upstream)."""
    b, s = setup()
    ids = b.tokenizer.encode(" wörld 日", add_special_tokens=False)
    body = {
        "generate_response": {
            "request_id": "r",
            "choices": [{"index": 0, "token_ids": ids, "logprobs": lp_content(ids)}],
        },
        "chat_request": {"messages": [], "logprobs": True, "top_logprobs": 2},
    }
    content = derender.derender_chat(b, s, body)["choices"][0]["logprobs"]["content"]
    assert [len(c["top_logprobs"]) for c in content] == [2] * len(ids)
    assert b"".join(bytes(c["bytes"]) for c in content).decode() == " wörld 日"
    assert content[0]["token"] == b.tokenizer.decode(ids[:1])
    joined = "".join(c["token"] for c in content)
    assert joined == " wörld 日"


def test_chat_logprobs_of_split_character_across_chunks():
    """Streaming: a character split over byte tokens in separate chunks: the last piece's token
    string is the whole character (context carried in the state), each piece keeps its byte."""
    b, s = setup()
    ids = byte_token_ids(b.tokenizer, "日".encode())
    state, tokens, raw = None, [], []
    for i, t in enumerate(ids):
        body = stream_body([t], state, finish="stop" if i == 2 else None, logprobs=lp_content([t], 0))
        if state is None:
            body["chat_request"] = {"messages": [], "logprobs": True}
        r = derender.derender_chat(b, s, body)
        state = r["stream_state"]
        entry = r["chunk"]["choices"][0]["logprobs"]["content"][0]
        tokens.append(entry["token"])
        raw.extend(entry["bytes"])
    assert tokens == ["", "", "日"] and bytes(raw) == "日".encode()


def test_completion_logprobs_text_offset_across_chunks():
    """Completions streaming logprobs: parallel lists, text_offset continues across chunks,
    top_logprobs cut to logprobs + 1."""
    b, s = setup()
    ids = b.tokenizer.encode("Héllo wörld", add_special_tokens=False)
    state, offsets, tokens = None, [], []
    for t in ids:
        body = stream_body([t], state, request_id="c", logprobs=lp_content([t], 4))
        if state is None:
            body["completion_request"] = {"prompt": "x", "logprobs": 1}
        r = derender.derender_completion(b, s, body)
        state = r["stream_state"]
        lp = r["chunk"]["choices"][0]["logprobs"]
        assert all(len(d) <= 2 for d in lp["top_logprobs"])
        offsets += lp["text_offset"]
        tokens += lp["tokens"]
    want, pos = [], 0
    for tok in tokens:
        want.append(pos)
        pos += len(tok)
    assert offsets == want and "".join(tokens) == "Héllo wörld"


def test_n_choices_and_usage():
    """n > 1: every choice is decoded independently (index kept); completion_tokens sums all
    choices; prompt_tokens is 0 when the caller does not send it (vLLM 0.33; golden in
    tests/data/vllm_derender_golden.json)."""
    b, s = setup()
    a = b.tokenizer.encode("first", add_special_tokens=False)
    c = b.tokenizer.encode("second one", add_special_tokens=False)
    body = {
        "generate_response": {
            "request_id": "r",
            "choices": [{"index": 0, "token_ids": a}, {"index": 1, "token_ids": c}],
        },
        "prompt_token_ids": [1, 2, 3],
    }
    out = derender.derender_chat(b, s, body)
    assert [ch["message"]["content"] for ch in out["choices"]] == ["first", "second one"]
    assert [ch["index"] for ch in out["choices"]] == [0, 1]
    assert out["usage"] == {
        "prompt_tokens": 0,
        "total_tokens": len(a) + len(c),
        "completion_tokens": len(a) + len(c),
        "prompt_tokens_details": None,
        "completion_tokens_details": None,
    }


def test_completions_batch_flattens_responses():
    """Completions batch: choices flattened with a running index, usage summed over responses,
    id from the first response; return_token_ids echoes ids."""
    b, s = setup()
    x = b.tokenizer.encode("x y", add_special_tokens=False)
    body = {
        "generate_responses": [
            {
                "request_id": "cmpl-1-0",
                "choices": [{"index": 0, "token_ids": x}, {"index": 1, "token_ids": x}],
            },
            {"request_id": "cmpl-1-1", "choices": [{"index": 0, "token_ids": x}]},
        ],
        "prompt_tokens": [4, 5],
        "completion_request": {"prompt": ["a", "b"], "return_token_ids": True},
    }
    out = derender.derender_completion(b, s, body)
    assert out["id"] == "cmpl-1-0" and [c["index"] for c in out["choices"]] == [0, 1, 2]
    assert [c["text"] for c in out["choices"]] == ["x y"] * 3 and out["choices"][0]["token_ids"] == x
    assert out["usage"]["prompt_tokens"] == 9 and out["usage"]["completion_tokens"] == 3 * len(x)
    with pytest.raises(ValidationError, match=r"prompt_tokens length \(1\) must equal generate_responses length"):
        derender.derender_completion(b, s, {**body, "prompt_tokens": [1]})  # vLLM 0.33's check


def test_usage_only_chunk_and_prompt_tokens_from_first_call():
    """A usage-only generate chunk gives choices [] and usage; prompt_tokens given on the first
    call is remembered by the state."""
    b, s = setup()
    first = {
        "stream": True,
        "prompt_tokens": 42,
        "generate_chunk": {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707]}]},
    }
    state = derender.derender_chat(b, s, first)["stream_state"]
    usage_chunk = {
        "stream": True,
        "stream_state": state,
        "generate_chunk": {
            "request_id": "r",
            "choices": [],
            "usage": {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12},
        },
    }
    chunk = derender.derender_chat(b, s, usage_chunk)["chunk"]
    assert (
        chunk["choices"] == []
        and chunk["usage"]["prompt_tokens"] == 42
        and chunk["usage"]["completion_tokens"] == 5
    )


def test_include_reasoning_false_hides_logprobs_and_token_ids():
    """With a parser and include_reasoning false, reasoning, logprobs and token_ids are hidden."""
    b, s = setup(reasoning_parser="qwen3")
    ids = b.tokenizer.encode("<think>secret</think>answer", add_special_tokens=False)
    body = {
        "generate_response": {
            "request_id": "r",
            "choices": [{"index": 0, "token_ids": ids, "logprobs": lp_content(ids)}],
        },
        "chat_request": {
            "messages": [],
            "include_reasoning": False,
            "return_token_ids": True,
            "logprobs": True,
        },
    }
    choice = derender.derender_chat(b, s, body)["choices"][0]
    assert choice["message"]["reasoning"] is None and choice["message"]["content"] == "answer"
    assert choice["logprobs"] is None and choice["token_ids"] is None


def test_validation_errors_are_pydantic_400s():
    """Wrong shapes are pydantic ValidationErrors (the app maps them to 400), never crashes."""
    b, s = setup()
    for body in ({"generate_response": {"choices": "nope"}}, {"stream": True}, {"generate_responses": []}):
        with pytest.raises(ValidationError):
            (derender.derender_completion if "generate_responses" in body else derender.derender_chat)(
                b, s, body
            )
    with pytest.raises(ValidationError, match="model_attributes_type"):  # as vLLM's FastAPI body
        derender.derender_chat(b, s, ["not", "an", "object"])


def test_n_choices_with_parser_are_independent():
    """n > 1 with a parser: each choice starts from the same parser state (one choice's
    parsing never leaks into the next)."""
    b, s = setup(reasoning_parser="qwen3")
    one = b.tokenizer.encode("<think>a</think>first", add_special_tokens=False)
    two = b.tokenizer.encode("<think>b</think>second", add_special_tokens=False)
    body = {
        "generate_response": {
            "request_id": "r",
            "choices": [{"index": 0, "token_ids": one}, {"index": 1, "token_ids": two}],
        },
        "chat_request": {"messages": []},
    }
    msgs = [c["message"] for c in derender.derender_chat(b, s, body)["choices"]]
    assert [(m["reasoning"], m["content"]) for m in msgs] == [("a", "first"), ("b", "second")]


@settings(max_examples=examples(40), deadline=None)
@given(sizes=cuts, k=st.integers(0, 3))
def test_completion_logprobs_stream_equals_batch(sizes, k):
    """Completions logprobs streamed in any split (state serialised between calls) equal the
    batch ones: tokens, token_logprobs, top_logprobs and absolute text_offset."""
    b, s = setup()
    ids = b.tokenizer.encode("Grüße aus 東京 😀!", add_special_tokens=False)
    req = {"prompt": "x", "logprobs": k}
    gen = {"request_id": "c", "choices": [{"index": 0, "token_ids": ids, "logprobs": lp_content(ids, 4)}]}
    want = derender.derender_completion(b, s, {"generate_responses": [gen], "completion_request": req})
    want_lp = want["choices"][0]["logprobs"]
    got = {key: [] for key in want_lp}
    state = None
    for chunk in split(ids, sizes):
        body = stream_body(chunk, state, request_id="c", logprobs=lp_content(chunk, 4))
        if state is None:
            body["completion_request"] = req
        r = derender.derender_completion(b, s, body)
        state = r["stream_state"]
        for key, values in r["chunk"]["choices"][0]["logprobs"].items():
            got[key] += values
    assert got == want_lp
