"""Reasoning and tool-call output parsers over one incremental engine (contract: ``parsers/README.md``).

Formats are declarative :class:`~parsers.spec.FormatSpec` values in ``parsers.formats``; the
registry below maps vLLM parser names to ``"module:attribute"`` strings, imported on first use.
To add a family: write ``parsers/formats/<family>_reasoning.py`` or ``<family>_tools.py`` exposing
``SPEC`` (naming scheme: ``parsers/formats/__init__.py``) and add its name here.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from .parser import Parser, join_deltas
from .spec import FormatSpec, Transition
from .types import Delta, ParseContext, ParseResult, ToolCall, ToolCallDelta

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "get_parser",
    "get_spec",
    "Parser",
    "FormatSpec",
    "Transition",
    "ParseContext",
    "ParseResult",
    "Delta",
    "ToolCall",
    "ToolCallDelta",
    "join_deltas",
]

_REASONING: dict[str, str] = {
    "deepseek_r1": "parsers.formats.deepseek_r1_reasoning:SPEC",
    "deepseek_v3": "parsers.formats.deepseek_v3_reasoning:SPEC",
    "ernie45": "parsers.formats.ernie45_reasoning:SPEC",
    "gemma4": "parsers.formats.gemma4_reasoning:SPEC",
    "glm45": "parsers.formats.glm45_reasoning:SPEC",
    "glm47": "parsers.formats.glm45_reasoning:SPEC",  # vLLM registers the same class for both
    "granite": "parsers.formats.granite_reasoning:SPEC",
    "holo2": "parsers.formats.deepseek_v3_reasoning:HOLO2",
    "hunyuan_a13b": "parsers.formats.hunyuan_a13b_reasoning:SPEC",
    "hy_v3": "parsers.formats.hy_v3_reasoning:SPEC",
    "kimi_k2": "parsers.formats.kimi_k2_reasoning:SPEC",
    "minimax_m2": "parsers.formats.minimax_m2_reasoning:SPEC",
    "minimax_m2_append_think": "parsers.formats.minimax_m2_reasoning:APPEND_THINK",
    "mistral": "parsers.formats.mistral_reasoning:SPEC",
    "nemotron_v3": "parsers.formats.nemotron_v3_reasoning:SPEC",
    "olmo3": "parsers.formats.olmo3_reasoning:SPEC",
    "gpt-oss": "parsers.formats.harmony:SPEC",
    "openai_gptoss": "parsers.formats.harmony:SPEC",
    "qwen3": "parsers.formats.qwen3_reasoning:SPEC",
    "seed_oss": "parsers.formats.seed_oss_reasoning:SPEC",
    "step3": "parsers.formats.step3_reasoning:SPEC",
    "step3p5": "parsers.formats.step3p5_reasoning:SPEC",
    "step5": "parsers.formats.deepseek_r1_reasoning:SPEC",  # vLLM: DeepSeekR1ReasoningParser
}
_TOOL: dict[str, str] = {
    "deepseek_v3": "parsers.formats.deepseek_v3_tools:SPEC",
    "deepseek_v31": "parsers.formats.deepseek_v3_tools:SPEC_V31",
    "hermes": "parsers.formats.hermes_tools:SPEC",
    "kimi_k2": "parsers.formats.kimi_k2_tools:SPEC",
    "openai": "parsers.formats.harmony:SPEC",
    "step3": "parsers.formats.step3_tools:SPEC",
    "qwen3_json": "parsers.formats.hermes_tools:SPEC",
    # JSON tool-call families (formats.json_factory)
    "ernie45": "parsers.formats.ernie45_tools:SPEC",
    "gigachat3": "parsers.formats.gigachat3_tools:SPEC",
    "granite": "parsers.formats.granite_tools:SPEC",
    "granite-20b-fc": "parsers.formats.granite_tools:SPEC_20B_FC",
    "granite4": "parsers.formats.granite_tools:SPEC_4",
    "hunyuan_a13b": "parsers.formats.hunyuan_a13b_tools:SPEC",
    "internlm": "parsers.formats.internlm_tools:SPEC",
    "jamba": "parsers.formats.jamba_tools:SPEC",
    "llama3_json": "parsers.formats.llama3_json_tools:SPEC",
    "llama4_json": "parsers.formats.llama3_json_tools:SPEC",
    "longcat": "parsers.formats.longcat_tools:SPEC",
    "mistral": "parsers.formats.mistral_tools:SPEC",
    "phi4_mini_json": "parsers.formats.phi4_mini_json_tools:SPEC",
    "xlam": "parsers.formats.xlam_tools:SPEC",
    # XML-style calls (parsers.xmlcalls)
    "qwen3_coder": "parsers.formats.qwen3_coder_tools:SPEC",
    "qwen3_xml": "parsers.formats.qwen3_coder_tools:SPEC",
    "step3p5": "parsers.formats.qwen3_coder_tools:SPEC",
    "seed_oss": "parsers.formats.seed_oss_tools:SPEC",
    "glm45": "parsers.formats.glm45_tools:SPEC",
    "glm47": "parsers.formats.glm45_tools:SPEC",
    "minimax_m2": "parsers.formats.minimax_m2_tools:SPEC",
    "deepseek_v32": "parsers.formats.deepseek_v32_tools:V32",
    "deepseek_v4": "parsers.formats.deepseek_v32_tools:V4",
    # pythonic calls (parsers.pycalls)
    "pythonic": "parsers.formats.pythonic_tools:SPEC",
    "llama4_pythonic": "parsers.formats.pythonic_tools:SPEC",
    "olmo3": "parsers.formats.olmo3_tools:SPEC",
    "lfm2": "parsers.formats.lfm2_tools:SPEC",
}

REASONING_PARSERS: tuple[str, ...] = tuple(sorted(_REASONING))
TOOL_PARSERS: tuple[str, ...] = tuple(sorted(_TOOL))


def get_spec(kind: str, name: str) -> FormatSpec:
    """The spec registered as ``name`` for ``kind`` (``"reasoning"`` or ``"tool"``).

    Raises:
        ValueError: unknown name.
    """
    table = _REASONING if kind == "reasoning" else _TOOL
    if name not in table:
        raise ValueError(f"unknown {kind} parser {name!r}; known: {', '.join(sorted(table))}")
    module, attr = table[name].split(":")
    spec = getattr(importlib.import_module(module), attr)
    assert isinstance(spec, FormatSpec)
    return spec


def get_parser(
    reasoning_parser: str | None, tool_call_parser: str | None, *, vocab: Mapping[str, int] | None = None
) -> Parser:
    """Compose the named parsers. ``vocab`` (token text → id) resolves marker token ids and the
    prompt scan; without it the prompt is not scanned.

    Raises:
        ValueError: unknown parser name.
    """
    rspec = get_spec("reasoning", reasoning_parser) if reasoning_parser else None
    tspec = get_spec("tool", tool_call_parser) if tool_call_parser else None
    vocab = vocab or {}
    texts = [t for s in (rspec, tspec) if s is not None for t in s.markers.values()]
    marker_ids = frozenset(vocab[t] for t in texts if t in vocab)
    prompt_ids: tuple[int | None, int | None, frozenset[int]] = (None, None, frozenset())
    if rspec is not None:
        prompt_ids = (
            vocab.get(rspec.prompt_open or ""),
            vocab.get(rspec.prompt_close or ""),
            frozenset(vocab[t] for t in rspec.turn_boundaries if t in vocab),
        )
    return Parser(rspec, tspec, marker_ids, prompt_ids)
