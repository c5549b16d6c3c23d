"""Reasoning and tool-call output parsers over one incremental engine (contract: ``parsers/README.md``).

Formats are declarative :class:`~parsers.spec.FormatSpec` values in ``parsers.formats``; the
registry below maps vLLM parser names to ``"module:attribute"`` strings, imported on first use.
To add a family: write ``parsers/formats/<family>_reasoning.py`` or ``<family>_tools.py`` exposing
``SPEC`` (naming scheme: ``parsers/formats/__init__.py``) and add its name here.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from .parser import Parser, join_deltas
from .spec import FormatSpec, Transition
from .types import Delta, ParseContext, ParseResult, ToolCall, ToolCallDelta, UnsupportedRequest

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "get_parser",
    "get_spec",
    "TEMPLATE_PARSERS",
    "REASONING_ALIASES",
    "SGLANG_TOOL_ALIASES",
    "DYNAMO_TOOL_ALIASES",
    "Parser",
    "FormatSpec",
    "Transition",
    "ParseContext",
    "ParseResult",
    "Delta",
    "ToolCall",
    "ToolCallDelta",
    "join_deltas",
    "UnsupportedRequest",
]

#: Names whose format the model folder describes (``response_template`` metadata).
_TEMPLATE = "parsers.formats.response_template:build"

#: Suffix of a registry entry: SGLang's behaviour over the entry's spec (undeclared tools dropped).
_SGLANG = "+sglang"

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
    # added for vLLM 0.33's full list
    "beam": _TEMPLATE,
    "hf": _TEMPLATE,
    "cohere_command3": "parsers.formats.cohere_command_reasoning:SPEC",
    "cohere_command4": "parsers.formats.cohere_command_reasoning:CMD4",
    "deepseek_v4": "parsers.formats.deepseek_v4_reasoning:SPEC",
    "deepseek_v41": "parsers.formats.deepseek_v4_reasoning:V41",
    "granite_thinking_parser": "parsers.formats.nemotron_v3_reasoning:GRANITE_THINKING",
    "hy_v4": "parsers.formats.hy_v3_reasoning:HY_V4",
    "inkling": "parsers.formats.inkling_reasoning:SPEC",
    "k2_horizon": "parsers.formats.k2_horizon_reasoning:SPEC",
    "kimi_k3": "parsers.formats.kimi_k3_reasoning:SPEC",
    "ling3": "parsers.formats.glm45_reasoning:SPEC",  # vLLM: the GLM-4.7 engine, thinking default on
    "mimo": "parsers.formats.qwen3_reasoning:SPEC",  # vLLM: qwen3_config(enable_thinking)
    "minicpmv": "parsers.formats.qwen3_reasoning:MINICPMV",  # vLLM: the qwen3 grammar + newlines
    "minimax_m3": "parsers.formats.minimax_m3_reasoning:SPEC",
    "muse": "parsers.formats.muse_reasoning:SPEC",
    "muse_glimmer": "parsers.formats.muse_reasoning:SPEC",
    "musespark1x": "parsers.formats.muse_reasoning:SPEC",  # vLLM: alias of muse
    "plamo3": "parsers.formats.plamo3_reasoning:SPEC",
    "poolside_v1": "parsers.formats.deepseek_v3_reasoning:POOLSIDE_V1",
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
    # added for vLLM 0.33's full list
    "apertus": "parsers.formats.apertus_tools:SPEC",
    "beam": _TEMPLATE,
    "hf": _TEMPLATE,
    "cohere_command3": "parsers.formats.cohere_command_tools:SPEC",
    "cohere_command4": "parsers.formats.cohere_command_tools:CMD4",
    "deepseek_v41": "parsers.formats.deepseek_v32_tools:V41",
    "dots": "parsers.formats.dots_tools:SPEC",
    "functiongemma": "parsers.formats.gemma4_tools:FUNCTIONGEMMA",
    "gemma4": "parsers.formats.gemma4_tools:SPEC",
    "hy_v3": "parsers.formats.hy_v3_tools:SPEC",
    "hy_v4": "parsers.formats.hy_v3_tools:HY_V4",
    "inkling": "parsers.formats.inkling_tools:SPEC",
    "k2_horizon": "parsers.formats.hy_v3_tools:K2_HORIZON",
    "kimi_k3": "parsers.formats.kimi_k3_tools:SPEC",
    "ling3": "parsers.formats.glm45_tools:SPEC",  # vLLM: the GLM-4.7 XML engine
    "mimo": "parsers.formats.qwen3_coder_tools:MIMO",
    "minicpm5": "parsers.formats.minicpm5_tools:SPEC",
    "minimax_m3": "parsers.formats.minimax_m3_tools:SPEC",
    "muse": "parsers.formats.dots_tools:MUSE",
    "muse_glimmer": "parsers.formats.dots_tools:MUSE",
    "musespark1x": "parsers.formats.dots_tools:MUSE",  # vLLM: alias of muse
    "plamo3": "parsers.formats.plamo3_tools:SPEC",
    "poolside_v1": "parsers.formats.glm45_tools:SPEC",  # GLM-4 <arg_key>/<arg_value> calls
    "step5": "parsers.formats.qwen3_coder_tools:STEP5",
}

#: SGLang's and the Rust gateways' (sgl-model-gateway, NVIDIA Dynamo) names for the same formats,
#: so a deployment keeps its flags. Reasoning aliases behave as their target.
REASONING_ALIASES: dict[str, str] = {
    "deepseek-r1": "deepseek_r1",
    "deepseek-v3": "deepseek_v3",
    "deepseek-v4": "deepseek_v4",
    "deepseek-v41": "deepseek_v41",
    "gigachat35": "deepseek_r1",  # SGLang: the R1 detector
    "gpt_oss": "openai_gptoss",  # Dynamo
    "hunyuan": "hunyuan_a13b",
    "minimax": "minimax_m2",
    "minimax-append-think": "minimax_m2_append_think",
    "minimax_append_think": "minimax_m2_append_think",  # Dynamo
    "minimax-m3": "minimax_m3",
    "nemotron_3": "nemotron_v3",
    "nemotron3": "nemotron_v3",  # Dynamo
    "nemotron_nano": "nemotron_v3",  # Dynamo
    "response_template": "hf",
}
#: Tool-call aliases with their target; the SGLang and sgl-model-gateway names follow SGLang's
#: behaviour (calls to undeclared tools dropped: ``FormatSpec.drop_unknown_tools``), the Dynamo
#: names the target's (vLLM) behaviour.
SGLANG_TOOL_ALIASES: dict[str, str] = {
    "apertus2509": "apertus",
    "deepseekv3": "deepseek_v3",
    "deepseekv31": "deepseek_v31",
    "deepseekv32": "deepseek_v32",
    "deepseekv4": "deepseek_v4",
    "deepseekv41": "deepseek_v41",
    "glm": "glm45",
    "hunyuan": "hunyuan_a13b",
    "llama3": "llama3_json",
    "minimax-m2": "minimax_m2",
    "minimax-m3": "minimax_m3",
    "qwen": "hermes",
    "qwen25": "hermes",  # Dynamo's qwen25 is hermes too; SGLang's behaviour wins
    "response_template": "hf",
    # sgl-model-gateway (Rust)
    "deepseek": "deepseek_v3",
    "glm4_moe": "glm45",
    "glm47_moe": "glm47",
    "kimik2": "kimi_k2",
    "llama": "llama3_json",
}
DYNAMO_TOOL_ALIASES: dict[str, str] = {
    "deepseek_v3_1": "deepseek_v31",
    "deepseek_v3_2": "deepseek_v32",
    "deepseek-v4": "deepseek_v4",
    "gemma-4": "gemma4",
    "harmony": "openai",
    "gpt-oss": "openai",  # SGLang too; kept as the one combined Harmony spec (the same object as
    # the reasoning side, so reasoning and calls parse in one pass)
    "nemotron_nano": "qwen3_coder",
    "phi4": "phi4_mini_json",
}
_REASONING |= {alias: _REASONING[target] for alias, target in REASONING_ALIASES.items()}
_REASONING["qwen3-thinking"] = "parsers.formats.qwen3_reasoning:THINKING"  # SGLang: forced reasoning
_REASONING["kimi"] = "parsers.formats.kimi_k2_reasoning:KIMI"  # SGLang: ◁think▷ markers
_TOOL |= {alias: _TOOL[target] for alias, target in DYNAMO_TOOL_ALIASES.items()}
_TOOL |= {alias: _TOOL[target] + _SGLANG for alias, target in SGLANG_TOOL_ALIASES.items()}
_TOOL["nanbeige"] = "parsers.formats.qwen3_coder_tools:SGLANG"  # SGLang's qwen3_coder behaviour

REASONING_PARSERS: tuple[str, ...] = tuple(sorted(_REASONING))
#: Names that build their format from the model's ``response_template`` metadata.
TEMPLATE_PARSERS: frozenset[str] = frozenset(
    n for t in (_REASONING, _TOOL) for n, v in t.items() if v.removesuffix(_SGLANG) == _TEMPLATE
)
TOOL_PARSERS: tuple[str, ...] = tuple(sorted(_TOOL))


def get_spec(
    kind: str, name: str, *, tokenizer_config: Mapping[str, Any] | None = None
) -> FormatSpec | None:
    """The spec registered as ``name`` for ``kind`` (``"reasoning"`` or ``"tool"``).
    ``tokenizer_config`` (the model folder's tokenizer_config.json contents) is read by the
    names whose format the model describes (``hf``, ``beam``: its ``response_template``); those
    return ``None`` when the template has no field of this kind.

    Raises:
        ValueError: unknown name; for ``hf``/``beam``, missing or unsupported metadata.
    """
    table = _REASONING if kind == "reasoning" else _TOOL
    if name not in table:
        raise ValueError(f"unknown {kind} parser {name!r}; known: {', '.join(sorted(table))}")
    entry = table[name]
    module, attr = entry.removesuffix(_SGLANG).split(":")
    value = getattr(importlib.import_module(module), attr)
    if entry.removesuffix(_SGLANG) == _TEMPLATE:
        value = value(kind, name, tokenizer_config)
    assert value is None or isinstance(value, FormatSpec)
    if value is not None and entry.endswith(_SGLANG):
        value = _sglang(value)
    return value


_SGLANG_SPECS: dict[int, tuple[FormatSpec, FormatSpec]] = {}


def _sglang(spec: FormatSpec) -> FormatSpec:
    """SGLang's behaviour over ``spec`` (one object per spec): calls to undeclared tools are
    dropped."""
    hit = _SGLANG_SPECS.get(id(spec))
    if hit is None or hit[0] is not spec:
        hit = _SGLANG_SPECS[id(spec)] = (spec, dataclasses.replace(spec, drop_unknown_tools=True))
    return hit[1]


def get_parser(
    reasoning_parser: str | None,
    tool_call_parser: str | None,
    *,
    vocab: Mapping[str, int] | None = None,
    tokenizer_config: Mapping[str, Any] | None = None,
) -> Parser:
    """Compose the named parsers. ``vocab`` (token text → id) resolves marker token ids and the
    prompt scan; without it the prompt is not scanned. ``tokenizer_config`` (the model folder's
    tokenizer_config.json contents) is needed by ``hf``/``beam`` only.

    Raises:
        ValueError: unknown parser name; ``hf``/``beam`` without usable ``response_template``.
    """
    config = tokenizer_config
    rspec = get_spec("reasoning", reasoning_parser, tokenizer_config=config) if reasoning_parser else None
    tspec = get_spec("tool", tool_call_parser, tokenizer_config=config) if tool_call_parser else None
    vocab = vocab or {}
    if vocab or config:  # FormatSpec.adapt: markers that depend on the checkpoint
        rspec = rspec.adapt(vocab, config or {}) if rspec is not None and rspec.adapt else rspec
        tspec = tspec.adapt(vocab, config or {}) if tspec is not None and tspec.adapt else tspec
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
