"""Chat render parity: our token ids equal transformers' ``apply_chat_template(tokenize=True)`` on
every model folder, for hand-made conversations, the 745 real requests (Qwen3: all; other models:
a fixed sample) and random message contents."""

from __future__ import annotations

import json

import jinja2
import pytest
from conftest import examples, shared_path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from render_helpers import TEMPLATE_MODEL_FOLDERS as MODEL_FOLDERS
from render_helpers import assert_tokens_eq, bundle_for, pin_clock, reference_ids, settings_for

from render_service.errors import TemplateRenderError
from render_service.protocol.chat import ChatCompletionRequest
from render_service.render import chat_prompt, messages

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather of a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}

CONVERSATIONS = {
    "single_user": [{"role": "user", "content": "Hello, world!"}],
    "system_multi_turn": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4"},
        {"role": "user", "content": "and 3+3? 日本語 ✓"},
    ],
    "tool_call_and_result": [
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "abcDEF123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "abcDEF123", "content": "18°C, sunny"},
    ],
    "reasoning_history": [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": "4", "reasoning_content": "2 plus 2 equals 4."},
        {"role": "user", "content": "and 3+3?"},
    ],
    "content_parts": [
        {"role": "user", "content": [{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]},
    ],
}


def ours_and_ref(folder: str, msgs: list, tools=None, kwargs=None, **opts):
    """(our ids or exception, reference ids or exception) for one conversation; both sides get
    the normalised messages and tools (vLLM's shapes)."""
    bundle, s = bundle_for(folder), settings_for(folder)
    tools = messages.validate_tools(tools)
    req = ChatCompletionRequest.model_validate(
        {"messages": msgs, "tools": tools, "chat_template_kwargs": kwargs, **opts}
    )
    try:
        ours = chat_prompt.chat_prompt(bundle, s, req, tools).token_ids
    except TemplateRenderError as exc:
        ours = exc
    conv = chat_prompt.conversation(bundle.compiled_template, s, msgs)
    add_gen = req.add_generation_prompt and not req.continue_final_message
    try:
        ref = reference_ids(bundle, conv, tools, kwargs or {}, add_gen, req.continue_final_message)
    except Exception as exc:  # transformers' own failure on this input
        ref = exc
    return bundle, ours, ref


@pytest.mark.parametrize("folder", MODEL_FOLDERS)
@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
def test_hand_made_conversations_match_transformers(folder, name, monkeypatch):
    """Each hand-made conversation (with tools offered) renders to transformers' exact ids; where
    transformers 5 fails on OpenAI's ``content: null`` (R1-Distill), ours renders what vLLM 0.33
    renders (``content: ""``: an empty assistant turn, the call not rendered; render golden
    ``history_tool_call_without_tools``)."""
    pin_clock(monkeypatch)
    tools = [WEATHER] if "tool" in name else None
    bundle, ours, ref = ours_and_ref(folder, CONVERSATIONS[name], tools)
    if isinstance(ref, Exception):
        assert folder.startswith("deepseek") and name == "tool_call_and_result", ref
        text = bundle.tokenizer.decode(ours)
        assert "<｜tool▁call▁begin｜>" not in text and "<｜Assistant｜><｜end▁of▁sentence｜>" in text
        assert "<｜tool▁output▁begin｜>18°C, sunny<｜tool▁output▁end｜>" in text
        return
    assert not isinstance(ours, Exception), ours
    assert_tokens_eq(bundle, ours, ref)


@pytest.mark.parametrize("folder", MODEL_FOLDERS)
def test_continue_final_message_matches_transformers(folder, monkeypatch):
    """``continue_final_message`` leaves the final assistant message open exactly as transformers."""
    pin_clock(monkeypatch)
    msgs = [{"role": "user", "content": "Tell me a joke."}, {"role": "assistant", "content": "Why did"}]
    bundle, ours, ref = ours_and_ref(folder, msgs, continue_final_message=True, add_generation_prompt=False)
    assert not isinstance(ref, Exception), ref
    assert_tokens_eq(bundle, ours, ref)
    assert bundle.tokenizer.decode(ours).endswith("Why did")


def _real_requests():
    path = shared_path("data", "chat_requests.jsonl")
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def _check_real(folder: str, records: list) -> dict:
    counts = {"same": 0, "both_refuse": 0, "ours_only": 0}
    for rec in records:
        # ``tools: []`` (10 records) is a 400 upstream and here; render those without tools
        bundle, ours, ref = ours_and_ref(
            folder, rec["messages"], rec.get("tools") or None, rec.get("chat_template_kwargs")
        )
        if isinstance(ref, Exception) and isinstance(ours, Exception):
            counts["both_refuse"] += 1
        elif isinstance(ref, Exception):
            counts["ours_only"] += 1
        else:
            assert not isinstance(ours, Exception), (rec["id"], ours)
            assert_tokens_eq(bundle, ours, ref)
            counts["same"] += 1
    return counts


@pytest.mark.xdist_group("Qwen--Qwen3-0.6B")  # with that folder's tests: shares its loaded bundle
def test_all_real_requests_qwen3():
    """All 745 real requests render on Qwen3 to transformers' exact ids."""
    counts = _check_real("Qwen--Qwen3-0.6B", _real_requests())
    assert counts == {"same": 745, "both_refuse": 0, "ours_only": 0}


SAMPLED = {
    # folder: (expected identical, both refuse, transformers fails but we render) on the sample
    "Qwen--Qwen2.5-7B-Instruct": (60, 0, 0),
    "Qwen--Qwen3-Coder-30B-A3B-Instruct": (60, 0, 0),
    # R1: transformers 5 drops ``content: null`` beside tool calls and the template then fails
    "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B": (54, 0, 6),
    "meta-llama--Llama-3.1-8B-Instruct": (60, 0, 0),
    "mistralai--Mistral-Nemo-Instruct-2407": (51, 9, 0),
}


@pytest.mark.parametrize("folder", sorted(SAMPLED))
def test_sampled_real_requests(folder, monkeypatch):
    """A fixed sample of 60 real requests (every 12th) per other model: identical ids wherever
    transformers renders; where the template refuses (Llama: one call per message; Mistral:
    9-char ids) we refuse too."""
    pin_clock(monkeypatch)
    records = _real_requests()[::12][:60]
    counts = _check_real(folder, records)
    assert (counts["same"], counts["both_refuse"], counts["ours_only"]) == SAMPLED[folder]


@pytest.mark.xdist_group("deepseek-ai--DeepSeek-R1-Distill-Qwen-7B")  # with that folder's tests: shares its loaded bundle
def test_r1_tool_history_renders_where_transformers_fails():
    """R1-Distill: for every real request with tool calls in history transformers 5 fails
    (``content: null`` dropped); ours renders what vLLM 0.33 renders, which hands the template
    ``content: ""``: an empty assistant turn without the call (render golden
    ``history_tool_call_without_tools``)."""
    records = [
        r
        for r in _real_requests()
        if any(m.get("tool_calls") and m.get("content") is None for m in r["messages"])
    ][:25]
    assert len(records) == 25
    bundle = bundle_for("deepseek-ai--DeepSeek-R1-Distill-Qwen-7B")
    for rec in records:
        _, ours, ref = ours_and_ref(
            "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B", rec["messages"], rec.get("tools") or None
        )
        assert isinstance(ref, Exception) and not isinstance(ours, Exception), (rec["id"], ours)
        text = bundle.tokenizer.decode(ours)
        first = next(m for m in rec["messages"] if m.get("tool_calls") and m.get("content") is None)
        first = first["tool_calls"][0]["function"]
        assert f"<｜tool▁sep｜>{first['name']}\n```json\n{first['arguments']}\n```" not in text
        assert "<｜Assistant｜><｜end▁of▁sentence｜>" in text


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40) | st.sampled_from(
    [
        "<|im_end|>",
        "<think>",
        "</tool_call>",
        "<|eot_id|>",
        "[INST]",
        "<s>",
        "<|start|>",
        "<｜User｜>",
        " ",
        "\n",
    ]
)


@pytest.mark.parametrize("folder", MODEL_FOLDERS)
@settings(
    max_examples=examples(60 // len(MODEL_FOLDERS)),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(parts=st.lists(_TEXT, min_size=1, max_size=4), answer=_TEXT)
def test_random_contents_match_transformers(folder, parts, answer, monkeypatch):
    """Random unicode and special-token-looking text in user/assistant turns renders identically.

    Parametrized by folder (60 examples in all, 10 per folder) rather than drawing the folder per
    example: each folder's examples run in its ``xdist_group`` where its bundle is loaded, instead of
    one test cycling through all folders (which reloaded evicted models: 11 loads, 25 CPU-s)."""
    pin_clock(monkeypatch)
    msgs = [
        {"role": "user", "content": "".join(parts)},
        {"role": "assistant", "content": answer},
        {"role": "user", "content": parts[0]},
    ]
    bundle, ours, ref = ours_and_ref(folder, msgs)
    if isinstance(ref, Exception):
        assert isinstance(ours, Exception)
        return
    assert not isinstance(ours, Exception), ours
    assert_tokens_eq(bundle, ours, ref)


_ARGS = st.dictionaries(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=6),
    st.none() | st.booleans() | st.integers() | st.text(max_size=10) | st.lists(st.integers(), max_size=3),
    max_size=3,
)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    # gpt-oss renders through openai-harmony as vLLM does, not through its Jinja template: its
    # arguments are pinned against vLLM by tests/test_render_goldens.py instead
    folder=st.sampled_from(["Qwen--Qwen3-0.6B", "meta-llama--Llama-3.1-8B-Instruct"]),
    args=_ARGS,
    result=_TEXT,
)
def test_random_tool_call_arguments_match_transformers(folder, args, result, monkeypatch):
    """Tool-call arguments sent as a JSON string (any keys/values, unicode) are parsed and render
    identically to transformers given the parsed mapping."""
    pin_clock(monkeypatch)
    msgs = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "abcDEF123",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": json.dumps(args)},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "abcDEF123", "content": result},
    ]
    bundle, ours, ref = ours_and_ref(folder, msgs, [WEATHER])
    assert not isinstance(ref, Exception), ref
    assert not isinstance(ours, Exception), ours
    assert_tokens_eq(bundle, ours, ref)


def test_release_qwen3_template_with_null_content_renders(monkeypatch):
    """The Qwen3 release template fails on ``content: null`` beside tool calls in transformers (both
    4.x and 5.x); ours renders it with ``content: ""``, exactly as transformers does for that."""
    from conftest import model_dir, shared_bundle

    from render_service.settings import Settings

    path = shared_path(
        "models", "Qwen--Qwen3-0.6B", "_alt_templates", "chat_template.release-2025-04.from-llama.cpp.jinja"
    )
    s = Settings(model=model_dir("Qwen--Qwen3-0.6B"), chat_template=str(path))
    bundle = shared_bundle(s)  # its own template; the folder's tokenizer and prompt encoder shared
    msgs = CONVERSATIONS["tool_call_and_result"]
    req = ChatCompletionRequest.model_validate({"messages": msgs, "tools": [WEATHER]})
    tools = messages.validate_tools([WEATHER])
    ours = chat_prompt.chat_prompt(bundle, s, req, tools).token_ids
    conv = chat_prompt.conversation(bundle.compiled_template, s, msgs)
    with pytest.raises(jinja2.exceptions.UndefinedError):
        bundle.tokenizer.apply_chat_template(
            conv.primary,
            tools=tools,
            chat_template=path.read_text(),
            add_generation_prompt=True,
            tokenize=False,
        )
    ref = bundle.tokenizer.apply_chat_template(
        conv.blank,
        tools=tools,
        chat_template=path.read_text(),
        add_generation_prompt=True,
        tokenize=True,
        return_dict=False,
    )
    assert_tokens_eq(bundle, ours, list(ref))
