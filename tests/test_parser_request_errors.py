"""A reasoning format that refuses the request's parse inputs answers 400 at render and at
derender, as vLLM 0.33 does: ``K2HorizonReasoningParser`` raises ``ValueError("Unsupported
reasoning_effort ...")`` when the request's parser is built (render's ``adjust_request`` and
derender's ``_parse_and_assemble``), which its serving layer turns into a 400 with that message
(``vllm/reasoning/k2_horizon_reasoning_parser.py``, ``entrypoints/scale_out/derender/serving.py``).
A supported effort is served."""

from __future__ import annotations

import pytest
from conftest import model_dir

MESSAGES = [{"role": "user", "content": "hi"}]


def _client(serve):
    folder = model_dir("Qwen--Qwen3-0.6B")
    return serve(model=folder, reasoning_parser="k2_horizon", max_model_len=4096, served_model_name=["m"])


@pytest.mark.parametrize("effort", ["max", 3])
def test_unsupported_reasoning_effort_is_a_400_at_render_and_derender(serve, effort):
    client = _client(serve)
    kwargs = {"reasoning_effort": effort}
    render = client.post(
        "/v1/chat/completions/render",
        json={"model": "m", "messages": MESSAGES, "chat_template_kwargs": kwargs},
    )
    assert render.status_code == 400, render.text
    error = render.json()["error"]
    assert error["message"].startswith(f"Unsupported reasoning_effort {effort!r}.")
    assert "high, medium, low" in error["message"]
    derender = client.post(
        "/v1/chat/completions/derender",
        json={
            "generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707, 151645]}]},
            "chat_request": {"model": "m", "messages": MESSAGES, "chat_template_kwargs": kwargs},
        },
    )
    assert derender.status_code == 400, derender.text
    assert derender.json()["error"]["message"] == error["message"]


def test_supported_reasoning_effort_is_served(serve):
    client = _client(serve)
    derender = client.post(
        "/v1/chat/completions/derender",
        json={
            "generate_response": {"request_id": "r", "choices": [{"index": 0, "token_ids": [9707, 151645]}]},
            "chat_request": {
                "model": "m",
                "messages": MESSAGES,
                "chat_template_kwargs": {"reasoning_effort": "low"},
            },
        },
    )
    assert derender.status_code == 200, derender.text
    assert derender.json()["choices"][0]["message"]["reasoning"] == "Hello"
