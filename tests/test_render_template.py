"""The sandboxed chat-template environment: HF-compatible features, content-format detection and
the time/size budgets that stop hostile templates."""

from __future__ import annotations

import threading

import pytest

from render_service import chat_template
from render_service.errors import TemplateRenderError

USER = [{"role": "user", "content": "hi"}]


def render(source: str, msgs=USER, **kw) -> str:
    """Render ``source`` with our environment."""
    return chat_template.render(chat_template.compile_template(source, {"bos_token": "<s>"}), msgs, **kw)


def test_tojson_has_hf_semantics():
    """``tojson`` keeps non-ASCII, honours indent/separators/sort_keys and does not HTML-escape."""
    out = render(
        "{{ {'b': 'é<>', 'a': 1} | tojson }}|{{ {'b': 1, 'a': 2} | tojson(indent=2, sort_keys=true) }}"
        "|{{ [1, 2] | tojson(separators=(',', ':')) }}"
    )
    assert out == '{"b": "é<>", "a": 1}|{\n  "a": 2,\n  "b": 1\n}|[1,2]'


def test_hf_globals_and_blocks():
    """trim/lstrip blocks, loopcontrols, ``{% generation %}``, special-token and dict/namespace globals."""
    src = (
        "{{ bos_token }}{% for m in messages %}{% if loop.index > 1 %}{% break %}{% endif %}\n"
        "  {% generation %}{{ m.content }}{% endgeneration %}{% endfor %}"
        "{% set ns = namespace(x=1) %}{{ ns.x }}{{ dict(a=1)['a'] }}"
    )
    assert render(src, USER + USER) == "<s>hi11"


def test_raise_exception_is_a_400_not_retried():
    """``raise_exception`` in the template becomes TemplateRenderError with the template's message."""
    with pytest.raises(TemplateRenderError, match="no system role"):
        render("{{ raise_exception('no system role') }}")


def test_strftime_now_renders_a_date():
    """``strftime_now`` is available (gpt-oss and Llama templates use it)."""
    assert len(render("{{ strftime_now('%Y-%m-%d') }}")) == 10


def test_sandbox_blocks_attribute_escape():
    """Dunder access is refused by the sandbox (400), not executed."""
    with pytest.raises(TemplateRenderError):
        render("{{ messages.__class__.__mro__ }}")


def test_namespace_refuses_underscore_names():
    """``namespace(_x=...)`` is refused as in transformers."""
    with pytest.raises(TemplateRenderError):
        render("{% set ns = namespace(_x=1) %}")


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
        "{% set xs = range(100000)|list %}{% for a in xs %}{% for b in xs %}{% endfor %}{% endfor %}",
    ],
)
def test_time_budget_stops_endless_loops(source):
    """Loops that produce nothing and call nothing are still stopped by the time budget."""
    with pytest.raises(TemplateRenderError, match="time budget"):
        render(source, max_seconds=0.3)


@pytest.mark.parametrize(
    "source",
    [
        "{% for i in range(100000) %}{% for j in range(100000) %}xxxxxxxxxx{% endfor %}{% endfor %}",
        "{{ 'a' * 100000000 }}",
        "{{ [1] * 100000000 }}",
    ],
)
def test_size_budget_stops_huge_output(source):
    """Huge output (or a huge ``*`` product) is stopped by the size budget."""
    with pytest.raises(TemplateRenderError, match="size budget"):
        render(source, max_chars=1_000_000)


def test_recursion_is_a_400():
    """Unbounded macro recursion becomes a 400, not a crash."""
    with pytest.raises(TemplateRenderError):
        render("{% macro f(x) %}{{ f(x) }}{% endmacro %}{{ f(1) }}")


def test_timeout_does_not_leak_into_later_work():
    """After a timed-out render the thread renders normally again (no stray async exception)."""
    errors = []

    def work():
        try:
            for _ in range(3):
                with pytest.raises(TemplateRenderError):
                    render(
                        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
                        max_seconds=0.05,
                    )
                assert render("{{ messages[0].content }}") == "hi"
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    t = threading.Thread(target=work)
    t.start()
    t.join(30)
    assert not errors and not t.is_alive()


def test_syntax_error_is_a_400():
    """A template that does not compile is a TemplateRenderError."""
    with pytest.raises(TemplateRenderError, match="does not compile"):
        chat_template.compile_template("{% for %}")


@pytest.mark.parametrize(
    "source,fmt",
    [
        ("{{ messages[0]['content'] }}", "string"),
        ("{% for part in message['content'] %}{{ part.text }}{% endfor %}", "openai"),
        ("{% set c = m.content %}{% for p in c %}{{ p }}{% endfor %}", "openai"),
        ("{% for m in messages %}{{ m.content }}{% endfor %}", "string"),
    ],
)
def test_content_format_detection(source, fmt):
    """A template that loops over a message's content (directly or via a variable) is "openai"."""
    assert chat_template.compile_template(source).content_format == fmt


def test_continue_final_message_with_trimmed_trailing_whitespace():
    """A template that trims the final message still continues it (vLLM #9547 / BR58)."""
    src = "{% for m in messages %}<{{ m.role }}>{{ m.content | trim }}</end>{% endfor %}"
    msgs = USER + [{"role": "assistant", "content": "OK!\n"}]
    out = render(src, msgs, add_generation_prompt=False, continue_final_message=True)
    assert out == "<user>hi</end><assistant>OK!"
