"""Responses ``usage.output_tokens_details.reasoning_tokens`` equals vLLM 0.33's count
(``tests/data/reasoning_token_goldens.json``, recorded from vLLM's own parser classes by
``tools/record_reasoning_token_goldens.py``) in batch, at one token per chunk and at random chunk
sizes: over real HTTP for Qwen3-0.6B (qwen3 + hermes), DeepSeek-R1-Distill (deepseek_r1) and
gpt-oss-20b (harmony), through the derender function for the other counting parsers (step3,
deepseek_v3, hy_v4, deepseek_r1 over Qwen3's vocabulary), and over the gateway-free live stream.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from conftest import folder_memo, model_dir
from derender_helpers import bundle, split
from hypothesis import given
from hypothesis import strategies as st

from render_service.derender import reasoning_tokens
from render_service.derender.pipeline import pipeline_for
from render_service.derender.responses import counter_start, derender_responses
from render_service.protocol.derender import ChatRequestFields
from render_service.settings import Settings

GOLDEN = json.loads((Path(__file__).parent / "data" / "reasoning_token_goldens.json").read_text())["cases"]
#: (model, reasoning parser) → server settings, the same as test_api_derender's (Qwen3, gpt-oss) and
#: test_e2e_families' (R1) so a suite run shares their servers.
_TOOLS = {"enable_auto_tool_choice": True, "max_model_len": 4096}
HTTP: dict[tuple[str, str], dict[str, Any]] = {
    ("Qwen--Qwen3-0.6B", "qwen3"): {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", **_TOOLS},
    ("deepseek-ai--DeepSeek-R1-Distill-Qwen-7B", "deepseek_r1"): {"reasoning_parser": "deepseek_r1"},
    ("openai--gpt-oss-20b", "openai_gptoss"): {
        "reasoning_parser": "openai_gptoss",
        "tool_call_parser": "openai",
        **_TOOLS,
    },
}
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}


def _request(case: dict[str, Any], model: str) -> dict[str, Any]:
    req: dict[str, Any] = {"model": model, "input": "Weather in Paris?", "tools": [WEATHER]}
    if case["chat_template_kwargs"]:
        req["chat_template_kwargs"] = case["chat_template_kwargs"]
    return req


def _batch_body(case: dict[str, Any], model: str) -> dict[str, Any]:
    return {
        "model": model,
        "generate_response": {
            "request_id": "resp_rt",
            "choices": [{"index": 0, "token_ids": case["token_ids"], "finish_reason": case["finish_reason"]}],
        },
        "prompt_token_ids": case["prompt_token_ids"] or None,
        "responses_request": _request(case, model),
    }


def _stream_bodies(case: dict[str, Any], model: str, sizes: list[int]):
    """Generator of per-call bodies; send the previous reply's ``stream_state`` back in."""
    chunks = list(split(case["token_ids"], sizes)) or [[]]
    state = None
    for i, chunk in enumerate(chunks):
        last = i == len(chunks) - 1
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_state": state,
            "generate_chunk": {
                "request_id": "resp_rt",
                "choices": [
                    {"index": 0, "token_ids": chunk, "finish_reason": case["finish_reason"] if last else None}
                ],
            },
        }
        if state is None:
            body.update(
                {
                    "responses_request": _request(case, model),
                    "prompt_token_ids": case["prompt_token_ids"] or None,
                }
            )
        reply = yield body
        state = reply["stream_state"]
        if reply["stop_generation"]:
            return


def _streamed_count(post, case: dict[str, Any], model: str, sizes: list[int]) -> int:
    gen = _stream_bodies(case, model, sizes)
    events: list[dict[str, Any]] = []
    body = next(gen)
    while True:
        reply = post(body)
        events.extend(reply["events"])
        try:
            body = gen.send(reply)
        except StopIteration:
            break
    terminal = events[-1]
    assert terminal["event"] in ("response.completed", "response.incomplete")
    return terminal["data"]["response"]["usage"]["output_tokens_details"]["reasoning_tokens"]


def _sizings(n: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[1] * n, [rng.randint(1, 6) for _ in range(n)]]


HTTP_CASES = [c for c in GOLDEN if (c["model"], c["reasoning_parser"]) in HTTP]
LOCAL_CASES = [c for c in GOLDEN if (c["model"], c["reasoning_parser"]) not in HTTP]


def test_golden_covers_counting_formats():
    """The golden has cases with a non-zero count for each rule the service mirrors."""
    kinds = {reasoning_tokens.RULES[c["reasoning_parser"]][0] for c in GOLDEN if c["reasoning_tokens"]}
    assert kinds == {"flag", "depth", "until_end", "hy_v4", "harmony"}


@pytest.mark.parametrize("case", HTTP_CASES, ids=[c["id"] for c in HTTP_CASES])
def test_reasoning_tokens_over_http(serve, case):
    client = serve(model=model_dir(case["model"]), **HTTP[(case["model"], case["reasoning_parser"])])
    model = client.get("/v1/models").json()["data"][0]["id"]
    batch = client.post("/v1/responses/derender", json=_batch_body(case, model))
    assert batch.status_code == 200, batch.text
    usage = batch.json()["usage"]
    assert usage["output_tokens_details"]["reasoning_tokens"] == case["reasoning_tokens"]
    assert usage["output_tokens"] == len(case["token_ids"])

    def post(body: dict[str, Any]) -> dict[str, Any]:
        out = client.post("/v1/responses/derender", json=body)
        assert out.status_code == 200, out.text
        return out.json()

    for sizes in _sizings(len(case["token_ids"]), seed=len(case["id"])):
        assert _streamed_count(post, case, model, sizes) == case["reasoning_tokens"], sizes


_SETTINGS: dict[tuple[str, str, str | None], Settings] = {}


def _local(case: dict[str, Any]) -> tuple[Any, Settings]:
    """The bundle and one shared ``Settings`` per (model, parsers), so the pipeline and parser
    caches (keyed by the settings object) are hit across cases."""
    key = (case["model"], case["reasoning_parser"], case["tool_call_parser"])
    if key not in _SETTINGS:
        _SETTINGS[key] = Settings(
            model=model_dir(case["model"]),
            reasoning_parser=case["reasoning_parser"],
            tool_call_parser=case["tool_call_parser"],
            enable_auto_tool_choice=True,
        )
    return bundle(case["model"]), _SETTINGS[key]


@pytest.mark.parametrize("case", LOCAL_CASES, ids=[c["id"] for c in LOCAL_CASES])
def test_reasoning_tokens_local(case):
    b, settings = _local(case)
    batch = derender_responses(b, settings, _batch_body(case, ""))
    assert batch["usage"]["output_tokens_details"]["reasoning_tokens"] == case["reasoning_tokens"]
    for sizes in _sizings(len(case["token_ids"]), seed=3):
        got = _streamed_count(lambda body: derender_responses(b, settings, body), case, "", sizes)
        assert got == case["reasoning_tokens"], sizes


#: The property runs on the cases over Qwen3's vocabulary (its bundle is loaded in-process by the
#: other tests; the R1 and gpt-oss cases go over HTTP at two chunkings above).
QWEN_VOCAB = [c for c in GOLDEN if c["model"] == "Qwen--Qwen3-0.6B"]


def _start(case: dict[str, Any]) -> tuple[Any, list[int]]:
    """The counting rule and the counter's start state of a golden case (computed once, kept
    while the case's model is: the rule holds its bundle)."""

    def build() -> tuple[Any, list[int]]:
        b, settings = _local(case)
        pipe = pipeline_for(b, settings)
        fields = ChatRequestFields(model="m", chat_template_kwargs=case["chat_template_kwargs"] or None)
        return pipe.counting, counter_start(pipe, settings, fields, case["prompt_token_ids"] or None)

    return folder_memo(case["model"], f"reasoning_tokens_start:{case['id']}", build)  # type: ignore[no-any-return]


@given(
    cuts=st.lists(st.integers(min_value=1, max_value=5), max_size=30),
    index=st.integers(0, len(QWEN_VOCAB) - 1),
)
def test_step_chunking_invariant(cuts, index):
    """Property: the id-level step over any chunking equals one step over all ids (the golden's
    outputs; harmony keeps its header ids across chunks), and counts vLLM's number."""
    case = QWEN_VOCAB[index]
    counting, start = _start(case)
    whole, _ = reasoning_tokens.step(counting, start, [], case["token_ids"])
    state, header = start, []
    for chunk in split(case["token_ids"], cuts):
        state, header = reasoning_tokens.step(counting, state, header, chunk)
    assert state == whole
    assert reasoning_tokens.count(whole) == case["reasoning_tokens"]


def test_no_counting_parser_reports_zero():
    """A reasoning parser whose vLLM class does not count (granite: base ``count_reasoning_tokens``)
    answers 0, as vLLM."""
    case = next(c for c in GOLDEN if c["id"] == "qwen3/think_answer")
    settings = Settings(model=model_dir(case["model"]), reasoning_parser="granite")
    out = derender_responses(bundle(case["model"]), settings, _batch_body(case, ""))
    assert out["usage"]["output_tokens_details"]["reasoning_tokens"] == 0
