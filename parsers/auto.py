"""``--reasoning-parser auto`` / ``--tool-call-parser auto``: parser names from a model folder's facts.

Pure: :func:`choose` takes :class:`ModelFacts` (``config.json`` ``architectures`` and
``model_type``, the chat template's text) and returns the vLLM parser names to use, with the
reason of each choice for the start-up log. Reading the folder is the caller's job.

The choice follows the model's own markup, which is what the parser must read: the chat template
shows the model its reasoning and tool-call markers (``<think>``, ``<tool_call>``,
``[TOOL_CALLS]``, ``<|python_tag|>`` ...), and ``model_type`` tells apart families that share a
marker (Qwen3's ``<think>`` vs DeepSeek-R1's). A tool parser is chosen only when the template
renders the request's ``tools`` (a model never shown tools does not call them). Anything not in
the tables below is "unknown": no parser, and the reason says so. The pairs match the flags of
the README's parser table (vLLM's documented flags per model).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

AUTO = "auto"


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What :func:`choose` reads of a model folder.

    Attributes:
        architectures: ``config.json`` ``architectures`` (e.g. ``("Qwen3ForCausalLM",)``).
        model_type: ``config.json`` ``model_type`` (e.g. ``"qwen3"``), or ``""``.
        chat_template: the chat template text the server renders with, or ``""``.
    """

    architectures: tuple[str, ...] = ()
    model_type: str = ""
    chat_template: str = ""


@dataclass(frozen=True, slots=True)
class AutoChoice:
    """The chosen names (``None``: no parser) and one line of reasons for the start-up log."""

    reasoning_parser: str | None
    tool_call_parser: str | None
    reason: str


# (model_type prefix or "" for any, markers that must all be in the template, parser name);
# the first matching row wins, so specific rows come before generic ones.
_REASONING_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("gpt_oss", (), "openai_gptoss"),
    ("", ("<|channel|>", "<|message|>"), "openai_gptoss"),
    ("", ("<think>", "<｜Assistant｜>"), "deepseek_r1"),
    ("qwen3", ("<think>",), "qwen3"),
    ("glm4", ("<think>",), "glm45"),
    ("minimax", ("<think>",), "minimax_m2"),
    ("seed_oss", ("<seed:think>",), "seed_oss"),
    ("ernie", ("<think>",), "ernie45"),
    ("hunyuan", ("<think>",), "hunyuan_a13b"),
    ("olmo3", ("<think>",), "olmo3"),
    ("kimi", ("<think>",), "kimi_k2"),
    ("step3", ("<think>",), "step3"),
    ("", ("[THINK]",), "mistral"),
    ("", ("<think>", "</think>"), "qwen3"),
)
_TOOL_RULES: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("gpt_oss", (), "openai"),
    ("", ("<|channel|>", "<|message|>"), "openai"),
    ("", ("<tool_call>", "<function="), "qwen3_coder"),
    ("", ("<tool_call>", "<arg_key>"), "glm45"),
    ("", ("<minimax:tool_call>",), "minimax_m2"),
    ("", ("<seed:tool_call>",), "seed_oss"),
    ("", ("<longcat_tool_call>",), "longcat"),
    ("", ("<|tool_calls_section_begin|>",), "kimi_k2"),
    ("", ("<｜tool▁calls▁begin｜>",), "deepseek_v3"),
    ("", ("<tool_call>",), "hermes"),
    ("", ("[TOOL_CALLS]",), "mistral"),
    ("", ("<|python_start|>",), "llama4_pythonic"),
    ("", ("<|python_tag|>",), "llama3_json"),
    ("llama", (), "llama3_json"),
    ("granite", ("<|tool_call|>",), "granite"),
)
_RENDERS_TOOLS = re.compile(r"\btools\b")


def _first(rules: Sequence[tuple[str, tuple[str, ...], str]], facts: ModelFacts) -> str | None:
    model_type = facts.model_type.lower()
    for prefix, markers, name in rules:
        if prefix and not model_type.startswith(prefix):
            continue
        if all(m in facts.chat_template for m in markers):
            return name
    return None


def choose(facts: ModelFacts, reasoning: bool = True, tools: bool = True) -> AutoChoice:
    """The parsers for a model: ``reasoning`` / ``tools`` say which of the two are asked for
    (``auto`` given for that flag); the other comes back ``None``.

    Returns:
        :class:`AutoChoice`; a family not in the tables gives ``None`` and a reason naming the
        model type and architectures, so the log says what was not recognised.
    """
    what = f"model_type={facts.model_type or '?'} architectures={','.join(facts.architectures) or '?'}"
    r = _first(_REASONING_RULES, facts) if reasoning else None
    t = None
    if tools:
        t = _first(_TOOL_RULES, facts) if _RENDERS_TOOLS.search(facts.chat_template) else None
        if t is None and facts.model_type.lower().startswith("gpt_oss"):
            t = "openai"
    parts = []
    if reasoning:
        parts.append(f"reasoning parser {r}" if r else "no reasoning parser (no known reasoning markers)")
    if tools:
        parts.append(
            f"tool-call parser {t}" if t else "no tool-call parser (template shows no known tool-call format)"
        )
    return AutoChoice(r, t, f"auto: {'; '.join(parts)} for {what}")
