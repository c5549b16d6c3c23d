"""The minijinja twin of a chat template (render_service/fast_template.py): proven at start-up on
probes, then identical to the jinja2 sandbox on real requests; a template it renders differently
keeps the sandbox (with a log line); at request time any failure of it is answered by the sandbox."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from conftest import model_dir, shared_path

from render_service import chat_template, fast_template
from render_service.errors import TemplateRenderError
from render_service.models import read_model_facts

FOLDERS = (
    "Qwen--Qwen3-0.6B",
    "Qwen--Qwen2.5-7B-Instruct",
    "Qwen--Qwen2.5-VL-7B-Instruct",
    "Qwen--Qwen3-VL-2B-Instruct",
    "Qwen--Qwen3-Coder-30B-A3B-Instruct",
    "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B",
    "meta-llama--Llama-3.1-8B-Instruct",
    "mistralai--Mistral-Nemo-Instruct-2407",
)
#: gpt-oss's template prints a tool parameter's whole-float default through ``tojson``, which
#: minijinja hands over as an integer (5.0 -> 5): the probes catch it.
DIFFERS = "openai--gpt-oss-20b"


def _special_tokens(folder: Path) -> dict[str, Any]:
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    out = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def _compiled(name: str) -> chat_template.CompiledTemplate:
    folder = Path(model_dir(name))
    source = read_model_facts(str(folder)).chat_template
    return chat_template.with_fast(chat_template.compile_template(source, _special_tokens(folder)))


def _requests(shared: Path, n: int) -> list[dict[str, Any]]:
    lines = (shared / "data" / "chat_requests.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in itertools.islice((x for x in lines if x.strip()), n)]


@pytest.fixture(scope="module")
def real_requests() -> list[dict[str, Any]]:
    return _requests(shared_path(), 120)


def _sandbox(ct: chat_template.CompiledTemplate, **kw: Any) -> str | None:
    try:
        return chat_template.render(chat_template.CompiledTemplate(
            ct.source, ct.template, ct.content_format, ct.special_tokens, ct.supports_developer), **kw)
    except TemplateRenderError:
        return None


@pytest.mark.parametrize("name", FOLDERS)
def test_proven_template_renders_real_requests_as_the_sandbox(name: str, real_requests: list) -> None:
    ct = _compiled(name)
    assert ct.fast is not None, "the probes should prove this template"
    compared = 0
    for req in real_requests:
        kw = {"messages": req["messages"], "tools": req.get("tools")}
        want = _sandbox(ct, **kw)
        variables = {**ct.special_tokens, **kw, "documents": None, "add_generation_prompt": True}
        try:
            got = ct.fast.render(variables, 8_000_000)
        except fast_template.FastRenderFailed:
            got = None  # at request time the sandbox answers
        if got is not None:
            assert got == want, req.get("id")
            compared += 1
        # the served path (fast first, sandbox on failure) gives the sandbox's answer
        try:
            served: str | None = chat_template.render(ct, **kw)
        except TemplateRenderError:
            served = None
        assert served == want
    assert compared >= len(real_requests) // 2, "the fast path should render most real requests"


def test_a_template_minijinja_renders_differently_keeps_the_sandbox(caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="render_service.fast_template")
    ct = _compiled(DIFFERS)
    assert ct.fast is None
    assert "differs from the jinja2 sandbox" in caplog.text
    # and the difference is real: the fast renderer, forced, prints 5 for the default 5.0
    fast = chat_template.fast_twin(ct.source)
    assert fast is not None
    probe = {**ct.special_tokens, **fast_template.probes()[2]}
    assert fast.render(probe, 8_000_000) != chat_template._run_budgeted(ct, probe, 2.0, 8_000_000)


def test_prove_rejects_another_text_and_a_text_where_the_sandbox_raises(caplog: Any) -> None:
    caplog.set_level(logging.INFO, logger="render_service.fast_template")
    source = "{{ x|tojson }}"
    ct = chat_template.compile_template(source)

    def reference(v: dict[str, Any]) -> str:
        return chat_template._run_budgeted(ct, v, 2.0, 1000)

    twin = chat_template.fast_twin(source)
    assert fast_template.prove(twin, reference, {}, [{"x": 1.5}, {"x": "a"}]) is not None
    assert fast_template.prove(twin, reference, {}, [{"x": 1.5}, {"x": 5.0}]) is None  # "5" vs "5.0"

    def raising(v: dict[str, Any]) -> str:
        raise TemplateRenderError("no")

    assert fast_template.prove(twin, raising, {}, [{"x": 1}]) is None
    assert caplog.text.count("differs from the jinja2 sandbox") == 2


def test_fast_failures_at_request_time_are_answered_by_the_sandbox() -> None:
    source = ("{% if messages[0].content == 'boom' %}{{ raise_exception('no boom here') }}{% endif %}"
              "{% for m in messages %}{{ m.content }}{% endfor %}")
    ct = chat_template.with_fast(chat_template.compile_template(source))
    assert ct.fast is not None
    assert chat_template.render(ct, [{"role": "user", "content": "fine"}]) == "fine"
    with pytest.raises(TemplateRenderError, match="^no boom here$"):
        chat_template.render(ct, [{"role": "user", "content": "boom"}])
    with pytest.raises(TemplateRenderError, match="size budget"):
        chat_template.render(ct, [{"role": "user", "content": "x" * 50}], max_chars=10)


def test_continue_final_message_through_the_fast_path() -> None:
    ct = _compiled("Qwen--Qwen3-0.6B")
    assert ct.fast is not None
    msgs = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello, I am"}]
    kw: dict[str, Any] = {"add_generation_prompt": False, "continue_final_message": True}
    assert chat_template.render(ct, msgs, **kw) == _sandbox(ct, messages=msgs, **kw)
    assert chat_template.render(ct, msgs, **kw).endswith("Hello, I am")


def test_concurrent_renders_from_threads_agree_and_finish() -> None:
    """The worker pool renders from several threads: minijinja's calls back into Python
    (``tojson``) must neither deadlock with the GIL nor mix outputs."""
    import sys
    import threading

    ct = _compiled("Qwen--Qwen3-0.6B")
    assert ct.fast is not None
    body = json.loads(shared_path("bench", "chat_9k.json").read_text(encoding="utf-8"))
    want = _sandbox(ct, messages=body["messages"], tools=body["tools"])
    bad: list[str] = []

    def work() -> None:
        for _ in range(10):
            if chat_template.render(ct, body["messages"], tools=body["tools"]) != want:
                bad.append("differs")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, also inside the filter callbacks
    try:
        threads = [threading.Thread(target=work, daemon=True) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    assert not bad
