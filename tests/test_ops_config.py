"""CLI ↔ Settings ↔ worker hand-off: no drift between flags, defaults and what workers receive."""

from __future__ import annotations

import dataclasses

from render_service.serving.cli import build_parser, settings_from_args
from render_service.serving.lifecycle import settings_from_json, settings_to_json
from render_service.settings import Settings


def test_cli_defaults_equal_settings_defaults(monkeypatch):
    """`render-service serve` with no flags (and no RENDER_SERVICE_* env) yields exactly Settings(),
    apart from the parsers `auto` picks for the embedded Qwen3 model (tests/test_auto_parsers.py)."""
    import os

    for name in [n for n in os.environ if n.startswith("RENDER_SERVICE_") or n == "VLLM_API_KEY"]:
        monkeypatch.delenv(name)
    auto = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
    assert settings_from_args(build_parser().parse_args(["serve"])) == Settings(**auto)


def test_every_settings_field_has_a_flag():
    """Each Settings field can be set from the command line (a flag whose dest maps onto it)."""
    dests = {a.dest for a in build_parser()._subparsers._group_actions[0].choices["serve"]._actions}
    aliases = {"model": "model_flag", "api_keys": "api_key", "stream_state_keys": "stream_state_key",
               "engine_urls": "engine_url", "prefill_urls": "prefill_url"}
    for field in dataclasses.fields(Settings):
        assert aliases.get(field.name, field.name) in dests, field.name


def test_settings_survive_the_worker_hand_off():
    """Settings serialized for worker processes come back equal (tuples and dicts included)."""
    s = Settings(served_model_name=("a", "b"), api_keys=("k" * 20,), stream_state_keys=("s" * 20, "t" * 20),
                 default_chat_template_kwargs={"enable_thinking": False}, max_n=3, queue_timeout=1.5,
                 engine_urls=("http://e1", "http://e2"), prefill_urls=("http://p1",))
    assert settings_from_json(settings_to_json(s)) == s
