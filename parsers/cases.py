"""Load conformance cases (``parser_cases.jsonl`` and the parser cases of ``bug_cases.jsonl``)
into one shape, and chunk model outputs the way the upstream streaming tests do.

Shapes of the two files: see ``shared/reference/parsers.md`` section 8 (parser cases) and
the ``input``/``expected`` objects of ``bug_cases.jsonl`` (one of ``model_output`` or
``variants[i].model_output``; expectations such as ``tool_calls``, ``reasoning_stripped``,
``no_content_delta_contains``). Bug cases without a model output (render, detokenizer) are
not parser cases and are skipped.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

SHARED = Path(os.environ.get("RENDER_SERVICE_SHARED", Path(__file__).resolve().parents[2] / "shared"))

#: Case model names → tokenizer folders in ../shared/models with the same vocabulary family.
MODEL_FOLDERS: tuple[tuple[str, str], ...] = (
    (r"Qwen3-Coder", "Qwen--Qwen3-Coder-30B-A3B-Instruct"),
    (r"DeepSeek-R1-Distill-Qwen", "deepseek-ai--DeepSeek-R1-Distill-Qwen-7B"),
    (r"Qwen3|QwQ|Qwen2\.5|Qwen/Qwen", "Qwen--Qwen3-0.6B"),
    (r"Llama-3", "meta-llama--Llama-3.1-8B-Instruct"),
    (r"gpt-oss", "openai--gpt-oss-20b"),
)

#: Parser names used by SGLang cases or bug reports → (reasoning parser, tool parser) in vLLM names.
PARSER_ALIASES: dict[str, tuple[str | None, str | None]] = {
    "hermes tool + think": ("qwen3", "hermes"),
    "basic/deepseek_r1 reasoning (streaming)": ("deepseek_r1", None),
    "any multi-call parser (example in hermes format)": (None, "hermes"),
    "hermes-style (<tool_call>)": (None, "hermes"),
    # vLLM 0.33 constrains hermes', llama3_json's and qwen3_coder's named/required choices with a
    # structural tag (the model writes its own format), so the guided-JSON named choice is that of
    # a format without one, such as xlam
    "named tool_choice (guided JSON)": (None, "xlam"),
    "pythonic (also llama4_pythonic)": (None, "pythonic"),
    "llama3_json / llama4_json": (None, "llama3_json"),
    "xlam (also hunyuan_a13b)": (None, "xlam"),
}
#: SGLang reasoning-parser names → ours where the case's semantics match. SGLang's base detector
#: with force_reasoning=False reads untagged text as content (deepseek_r1: reasoning); the base
#: case is fully tagged, where both agree. SGLang ``kimi`` (``◁think▷``) has no vLLM parser.
SGLANG_NAMES = {"deepseek-r1": "deepseek_r1", "base <think>/</think> (force_reasoning=False)": "deepseek_r1"}
#: A generic tool list for tool-parser cases whose test called the parser without tools.
PLACEHOLDER_TOOLS = ({"type": "function", "function": {"name": "placeholder", "parameters": {}}},)


@dataclass(slots=True)
class Case:
    """One conformance case in a uniform shape.

    Attributes:
        id: case id (``BRxx#vN`` for the N-th variant of a bug case).
        reasoning, tool: parser names (vLLM) to compose.
        text: the model output, markers as text.
        modes: ``"batch"`` and/or ``"streaming"``.
        expected / expected_streaming: parser-case expectations ``{content, reasoning, tool_calls}``.
        checks: bug-case expectation keys (see ``parsers.conformance.BUG_CHECKS``).
        ctx: ``ParseContext`` keyword arguments.
        prompt: prompt text whose token ids set the initial state, or ``None``.
        model: the case's model name (chooses the tokenizer).
        notes: the case notes (tell which nulls are not asserted).
        is_reasoning_end: whether reasoning has ended after the whole output (parser cases).
        vocab_tokens: special tokens of the case's model vocabulary (parser cases'
            ``vocab_tokens``), for formats whose markers depend on it (Hunyuan suffixes).
    """

    id: str
    reasoning: str | None
    tool: str | None
    text: str
    modes: tuple[str, ...]
    expected: dict[str, Any] | None = None
    expected_streaming: dict[str, Any] | None = None
    checks: dict[str, Any] = field(default_factory=dict)
    ctx: dict[str, Any] = field(default_factory=dict)
    prompt: str | None = None
    model: str = ""
    notes: str = ""
    is_reasoning_end: bool | None = None
    vocab_tokens: tuple[str, ...] = ()


def load(path: str | Path) -> list[Case]:
    """Read a JSONL file of either kind; lines of other kinds are skipped."""
    cases: list[Case] = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            raw = json.loads(line)
            cases += from_parser_case(raw) if "parser_kind" in raw else from_bug_case(raw)
    return cases


def from_parser_case(raw: dict[str, Any]) -> list[Case]:
    """A ``parser_cases.jsonl`` line (reasoning cases run the reasoning parser alone)."""
    name = SGLANG_NAMES.get(raw["parser"], raw["parser"])
    if raw["parser_kind"] == "reasoning":
        reasoning, tool = name, None
    else:
        reasoning, tool = raw.get("reasoning_parser"), name
    request = raw.get("request") or {}
    return [
        Case(
            id=raw["id"],
            reasoning=reasoning,
            tool=tool,
            text=raw["model_output"],
            modes=tuple(raw["modes"]),
            expected=raw["expected"],
            expected_streaming=raw.get("expected_streaming"),
            ctx=_ctx(request, tool, (raw.get("expected") or {}).get("tool_calls")),
            model=raw.get("model", ""),
            notes=raw.get("notes", ""),
            is_reasoning_end=raw.get("is_reasoning_end"),
            vocab_tokens=tuple(raw.get("vocab_tokens") or ()),
        )
    ]


def from_bug_case(raw: dict[str, Any]) -> list[Case]:
    """The parser cases of ``bug_cases.jsonl`` (one Case per variant)."""
    inp, parser = raw.get("input") or {}, raw.get("parser")
    if not parser or raw.get("category") not in (
        "reasoning_parser",
        "tool_parser",
        "incremental_detokenization",
    ):
        return []
    reasoning, tool = bug_parsers(parser)
    modes = {"batch": ("batch",), "stream": ("streaming",)}.get(raw["mode"], ("batch", "streaming"))
    variants = inp.get("variants") or [inp]
    out = []
    for i, var in enumerate(variants):
        if "model_output" not in var:
            continue
        checks = raw["expected"].get(f"variant{i}", raw["expected"]) if "variants" in inp else raw["expected"]
        out.append(
            Case(
                id=raw["id"] + (f"#v{i}" if "variants" in inp else ""),
                reasoning=reasoning,
                tool=tool,
                text=var["model_output"],
                modes=modes,
                checks=checks,
                ctx=_ctx(inp, tool, checks.get("tool_calls")),
                prompt=inp.get("prompt_tail"),
                model=raw.get("tokenizer_model", ""),
                notes=raw.get("notes", ""),
            )
        )
    return out


def bug_parsers(parser: str) -> tuple[str | None, str | None]:
    """Parser pair for a bug report's free-text parser name (``"qwen3 reasoning"`` ...)."""
    if parser in PARSER_ALIASES:
        return PARSER_ALIASES[parser]
    first = re.match(r"[\w.-]+", parser)
    name = first.group() if first else parser
    return (name, None) if parser.endswith("reasoning") else (None, name)


def _ctx(request: dict[str, Any], tool: str | None, calls: Any = None) -> dict[str, Any]:
    tools = [t for t in request.get("tools") or () if isinstance(t, dict)]
    ctx: dict[str, Any] = {"tools": tuple(tools) or (_placeholder(calls) if tool else None)}
    for key in ("tool_choice", "chat_template_kwargs", "parallel_tool_calls", "include_reasoning"):
        if key in request:
            ctx[key] = request[key]
    return ctx


def _placeholder(calls: Any) -> tuple[dict[str, Any], ...]:
    """Tools for a case whose upstream test passed none: the placeholder plus the expected call
    names without schemas. Upstream parsers given no tools neither validate names (GLM,
    MiniMax drop undeclared tools) nor coerce types; schema-less declared names do the same."""
    names = [c["name"] for c in calls or () if isinstance(c, dict) and isinstance(c.get("name"), str)]
    return PLACEHOLDER_TOOLS + tuple(
        {"type": "function", "function": {"name": n, "parameters": {}}} for n in dict.fromkeys(names)
    )


def model_folder(model: str) -> Path | None:
    """The ../shared/models folder whose tokenizer matches ``model``, if present."""
    for pattern, folder in MODEL_FOLDERS:
        if re.search(pattern, model) and (SHARED / "models" / folder).is_dir():
            return SHARED / "models" / folder
    return None


@functools.cache
def tokenizer(folder: Path) -> Any:
    """A cached offline ``AutoTokenizer`` for ``folder``."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder))


@functools.cache
def tokenizer_vocab(folder: Path) -> Mapping[str, int]:
    """``tokenizer(folder).get_vocab()`` (token text -> id), built once per folder and read-only:
    Hugging Face builds the whole dict afresh on every call (150k-200k entries, a tenth of a second
    and more), which per case or per example cost more than the parsing they were for."""
    return MappingProxyType(dict(tokenizer(folder).get_vocab()))


def chunks(text: str, model: str) -> list[str]:
    """One chunk per token of the case's tokenizer (markers are added tokens, so they stay
    whole), else deterministic 1-2-3 character chunks."""
    folder = model_folder(model)
    if folder is None:
        sizes, i = (1, 2, 3), 0
        out: list[str] = []
        while i < len(text):
            size = sizes[len(out) % 3]
            out.append(text[i : i + size])
            i += size
        return out
    enc = tokenizer(folder)(text, add_special_tokens=False, return_offsets_mapping=True)
    out, prev = [], 0
    for _, end in enc["offset_mapping"]:
        end = max(end, prev)
        out.append(text[prev:end])
        prev = end
    if prev < len(text):
        out.append(text[prev:])
    return out
