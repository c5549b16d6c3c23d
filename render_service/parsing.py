"""The configured parser of a bundle: one ``parsers.Parser`` per bundle and settings.

Render asks it whether the prompt already ended reasoning and how forced tool calls are
constrained; derender feeds it the output. Both take the same instance from here, so neither wing
imports the other.
"""

from __future__ import annotations

from typing import Any

from .models import ModelBundle
from .settings import Settings
from .tokens.tokenization import vocab_lookup


def parser_for(bundle: ModelBundle, settings: Settings) -> Any:
    """The ``parsers.Parser`` for ``settings.reasoning_parser`` / ``settings.tool_call_parser``
    over the bundle's vocabulary, or ``None`` when neither is set. Built once per (bundle,
    settings) pair and kept by the bundle (:class:`~render_service.models.BundleMemo`).

    Raises:
        KeyError: an unknown parser name (``parsers.get_parser``).
        ValueError: ``hf``/``beam`` on a model without ``response_template`` metadata.
    """
    return bundle.memo.get("parser", settings, lambda: _new_parser(bundle, settings))


def _new_parser(bundle: ModelBundle, settings: Settings) -> Any:
    if not (settings.reasoning_parser or settings.tool_call_parser):
        return None
    import parsers

    return parsers.get_parser(
        settings.reasoning_parser,
        settings.tool_call_parser,
        vocab=vocab_lookup(bundle),
        tokenizer_config=getattr(bundle.tokenizer, "init_kwargs", None),  # hf/beam: response_template
    )


#: vLLM 0.33 parser names built on its ``ParserEngine`` (``vllm/parser/engine``), whose lexer
#: turns every special token that is none of the format's terminals into a dropped terminal
#: (``streaming_parser_engine._build_drop_info``). Listed from vLLM's registries
#: (``vllm/reasoning/__init__.py``, ``vllm/tool_parsers/__init__.py``: the classes that are
#: ``ParserEngineReasoningAdapter`` / ``ParserEngineToolAdapter`` subclasses). ``mistral`` is left
#: out: its engine drops nothing there (the differential harness measured a ``</s>`` inside
#: the output kept as text).
ENGINE_REASONING_PARSERS = frozenset({
    "deepseek_v4", "deepseek_v41", "gemma4", "glm45", "glm47", "ling3", "granite_thinking_parser",
    "kimi_k2", "mimo", "minicpmv", "minimax_m2", "nemotron_v3", "plamo3", "qwen3", "seed_oss",
    "step3p5", "inkling",
})
ENGINE_TOOL_PARSERS = frozenset({
    "deepseek_v32", "deepseek_v4", "deepseek_v41", "glm45", "glm47", "ling3", "granite", "kimi_k2",
    "mimo", "minimax_m2", "minimax_m3", "plamo3", "qwen3_coder", "qwen3_xml", "seed_oss",
    "step3p5", "step5", "inkling", "gemma4",
})
#: Engine tool parsers without ``supports_required_and_named``: vLLM parses a required or named
#: choice with the engine too (``glm47_moe_tool_parser``).
_ENGINE_TOOLS_AUTO_ONLY = frozenset({"glm45", "glm47"})
#: Harmony is read from its token ids (``openai_harmony``), not from text: its special tokens
#: other than the format's markers stay out of the text as before.
_HARMONY = frozenset({"openai", "openai_gptoss", "gpt-oss"})
#: Engine reasoning parsers whose ``extract_reasoning`` hands the whole output back untouched
#: when the request turns thinking off (``Qwen3Parser.extract_reasoning``: ``not
#: thinking_enabled``, read from ``chat_template_kwargs["enable_thinking"]``, default on).
_THINKING_SWITCH = frozenset({"qwen3"})


def _thinking_off(reasoning: str, ctx: Any) -> bool:
    """Whether ``reasoning`` leaves the output unlexed because the request turned thinking off."""
    kwargs = getattr(ctx, "chat_template_kwargs", None) or {}
    return reasoning in _THINKING_SWITCH and not kwargs.get("enable_thinking", True)


def drops_special_text(settings: Settings, ctx: Any) -> bool:
    """Whether the configured parsers leave a chat request's special tokens that are not
    format markers out of the parsed text (``True``), or keep them as text (``False``).

    vLLM 0.33's derender decodes every special token as text whenever a parser is configured
    (``online_derenderer._decode_params(preserve_special=True)``); the text then stays unless one
    of its engine-based parsers lexes it: an engine reasoning parser always runs
    (``extract_reasoning``); an engine tool parser runs under ``tool_choice`` ``auto`` and, with
    no reasoning parser or an engine one, ``none`` (no tools is ``none``), but not under a
    required or named choice, whose output vLLM reads as JSON (``DelegatingParser._extract_tool_calls``).
    A ``qwen3`` reasoning parser under ``enable_thinking: false`` lexes nothing
    (``Qwen3Parser.extract_reasoning``), so the tool parser's rule decides alone.
    ``ctx`` is the request's ``parsers.types.ParseContext``.
    """
    reasoning, tool = settings.reasoning_parser, settings.tool_call_parser
    if reasoning in _HARMONY or tool in _HARMONY:
        return True
    if reasoning in ENGINE_REASONING_PARSERS and not _thinking_off(reasoning, ctx):
        return True
    if tool not in ENGINE_TOOL_PARSERS or not settings.enable_auto_tool_choice:
        return False
    choice = ctx.tool_choice if ctx.tools else "none"
    if choice == "none":
        return reasoning is None
    if choice == "auto" or tool in _ENGINE_TOOLS_AUTO_ONLY:
        return True
    return False
