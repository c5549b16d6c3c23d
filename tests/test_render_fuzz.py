"""Property: whatever JSON a client sends, render answers with a result or a 4xx error — never an
unexpected exception (which the app would turn into a 500)."""

from __future__ import annotations

import pytest
from conftest import examples, shared_bundle
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from render_service import render
from render_service.errors import RenderServiceError
from render_service.settings import Settings

_SETTINGS = Settings(reasoning_parser="qwen3", tool_call_parser="hermes", enable_auto_tool_choice=True)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 10**6) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)
tool_call = st.fixed_dictionaries(
    {
        "id": st.text(max_size=4),
        "type": st.just("function"),
        "function": st.fixed_dictionaries(
            {
                "name": st.text(max_size=5) | json_values,
                "arguments": st.sampled_from(["{}", "{bad", '{"a": 1}', "", "[1]"]) | json_values,
            }
        ),
    }
)
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool", "SYSTEM"]) | json_values},
    optional={
        "content": st.text(max_size=20)
        | st.none()
        | st.lists(
            st.fixed_dictionaries(
                {"type": st.sampled_from(["text", "image_url"]), "text": st.text(max_size=5)}
            ),
            max_size=2,
        )
        | json_values,
        "tool_calls": st.lists(tool_call, max_size=2) | json_values,
        "reasoning_content": st.text(max_size=5) | json_values,
        "tool_call_id": st.text(max_size=4),
    },
)
bodies = st.fixed_dictionaries(
    {"messages": st.lists(message, max_size=4) | json_values},
    optional={
        "tools": st.just([{"type": "function", "function": {"name": "f"}}]) | json_values,
        "tool_choice": st.sampled_from(
            ["auto", "none", "required", {"type": "function", "function": {"name": "f"}}]
        )
        | json_values,
        "max_tokens": json_values,
        "logprobs": json_values,
        "top_logprobs": json_values,
        "stream": json_values,
        "stream_options": json_values,
        "chat_template_kwargs": json_values,
        "continue_final_message": json_values,
        "add_generation_prompt": json_values,
        "kv_transfer_params": json_values,
        "response_format": json_values,
    },
)


@pytest.fixture(scope="module")
def bundle():
    """Embedded Qwen3 bundle."""
    return shared_bundle(_SETTINGS)


@settings(max_examples=examples(200), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=bodies)
def test_any_chat_body_is_result_or_4xx(bundle, body):
    """Random chat bodies give a GenerateRequest or a 4xx error, nothing else."""
    try:
        out = render.render_chat(bundle, _SETTINGS, body)
    except ValidationError:
        return
    except RenderServiceError as exc:
        assert 400 <= exc.status_code < 500
        return
    assert out["token_ids"]


@settings(max_examples=examples(100), deadline=None)
@given(
    body=st.fixed_dictionaries(
        {"prompt": json_values},
        optional={"max_tokens": json_values, "suffix": json_values, "echo": json_values},
    )
)
def test_any_completion_body_is_result_or_4xx(bundle, body):
    """Random completions bodies give GenerateRequests or a 4xx error."""
    try:
        out = render.render_completion(bundle, _SETTINGS, body)
    except ValidationError:
        return
    except RenderServiceError as exc:
        assert 400 <= exc.status_code < 500
        return
    assert all(g["token_ids"] for g in out)
