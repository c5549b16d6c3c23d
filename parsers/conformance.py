"""Conformance runner: ``python -m parsers.conformance FILE.jsonl [--parser NAME] [--only-implemented]``.

Runs every case in batch mode (``Parser.parse``) and streaming mode (one token per chunk with
the case model's tokenizer when ../shared/models has that family, else 1-3 character chunks;
the state is passed through orjson between chunks). Prints one line per failed check
(``case id, mode, field: expected … got …``) and, last, exactly ``N passed, M failed``
counted per (case, mode). Cases whose parser is not implemented fail with "parser not
implemented" unless ``--only-implemented`` skips them.

Comparison rules: ``arguments`` by ``json.loads`` equality when both parse, else exactly;
``name``/``arguments`` ``null`` are not asserted; ``content``/``reasoning`` ``null`` are not
asserted when the notes say so. ``parsers/conformance_overrides.json`` replaces expectations
that record an upstream bug or a vLLM batch/stream difference we deliberately do not copy
(our stream always equals our batch); each entry gives its reason.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import REASONING_PARSERS, TOOL_PARSERS, get_parser
from .cases import Case, chunks, load, model_folder, tokenizer, tokenizer_vocab
from .harness import call_delta_problems, run_stream
from .types import Delta, ParseContext, ParseResult

OVERRIDES = Path(__file__).with_name("conformance_overrides.json")
Failure = tuple[str, Any, Any]
NOT_IMPLEMENTED: Failure = ("parser", None, "parser not implemented")


def implemented(case: Case) -> bool:
    """Whether both parsers the case needs exist in the registry."""
    return (case.reasoning is None or case.reasoning in REASONING_PARSERS) and (
        case.tool is None or case.tool in TOOL_PARSERS
    )


def apply_overrides(cases: list[Case], path: Path = OVERRIDES) -> list[Case]:
    """Replace expectations listed in the overrides file (fields merged into both modes)."""
    table = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    for case in cases:
        entry = table.get(case.id)
        if entry is None:
            continue
        if case.expected is not None:
            case.expected = {**case.expected, **entry.get("expected", {})}
            case.expected_streaming = None
        case.checks = {**case.checks, **entry.get("checks", {})}
    return cases


def run_case(case: Case, mode: str) -> list[Failure]:
    """Run one case in one mode; return its failed checks (empty = pass)."""
    if not implemented(case):
        return [NOT_IMPLEMENTED]
    folder = model_folder(case.model)
    tok = tokenizer(folder) if folder is not None else None
    vocab = dict(tokenizer_vocab(folder)) if folder is not None else {}
    vocab |= {t: len(vocab) + i for i, t in enumerate(case.vocab_tokens) if t not in vocab}
    parser = get_parser(case.reasoning, case.tool, vocab=vocab or None)
    ctx = ParseContext(**case.ctx)
    prompt = tok.encode(case.prompt, add_special_tokens=False) if tok is not None and case.prompt else None
    if mode == "batch":
        result = parser.parse(ctx, prompt, case.text)
        deltas: list[Delta] = []
        problems: list[Failure] = []
        ended = None
    else:
        deltas, result, _ = run_stream(
            parser, ctx, chunks(case.text, case.model), prompt_token_ids=prompt, roundtrip=True
        )
        problems = [("tool_calls.stream_rules", "none", p) for p in call_delta_problems(deltas)]
        ended = _ended(parser, ctx, prompt, case.text)
    if case.expected is not None:
        expected = (
            case.expected_streaming if mode == "streaming" and case.expected_streaming else case.expected
        )
        return problems + compare(expected, result, case.notes) + _check_ended(case, mode, ended)
    return problems + bug_checks(case.checks, result, deltas, mode)


def _ended(parser: Any, ctx: ParseContext, prompt: Sequence[int] | None, text: str) -> bool | None:
    state = parser.start(ctx, prompt)
    state, _ = parser.feed(state, text)
    return parser.reasoning_ended(state)


def _check_ended(case: Case, mode: str, ended: bool | None) -> list[Failure]:
    raw = case.is_reasoning_end
    return [] if raw is None or mode != "streaming" or ended == raw else [("is_reasoning_end", raw, ended)]


def not_asserted(field: str, notes: str) -> bool:
    """Whether the notes say a ``null`` expectation of ``field`` is not asserted."""
    return re.search(rf"\b{field}\b[^;.]*?(not asserted|unasserted)", notes) is not None


def compare(expected: dict[str, Any], got: ParseResult, notes: str) -> list[Failure]:
    """Parser-case comparison of content, reasoning and tool calls."""
    fails: list[Failure] = []
    for field in ("content", "reasoning"):
        want = expected.get(field)
        if want is None and not_asserted(field, notes):
            continue
        if field in expected and want != getattr(got, field):
            fails.append((field, want, getattr(got, field)))
    want_calls = expected.get("tool_calls") or []
    if len(want_calls) != len(got.tool_calls):
        return fails + [("tool_calls", _show(want_calls), _show(got.tool_calls))]
    for i, (want, call) in enumerate(zip(want_calls, got.tool_calls, strict=True)):
        if want.get("name") is not None and want["name"] != call.name:
            fails.append((f"tool_calls[{i}].name", want["name"], call.name))
        if want.get("arguments") is not None and not same_arguments(want["arguments"], call.arguments):
            fails.append((f"tool_calls[{i}].arguments", want["arguments"], call.arguments))
    return fails


def same_arguments(want: Any, got: str) -> bool:
    """``json.loads`` equality when both parse (``want`` may already be an object), else exact."""
    try:
        return (json.loads(want) if isinstance(want, str) else want) == json.loads(got)
    except ValueError:
        return want == got


def _show(calls: Sequence[Any]) -> list[Any]:
    return [c if isinstance(c, dict) else {"name": c.name, "arguments": c.arguments} for c in calls]


def _text(value: str | None) -> str:
    return value or ""


BUG_CHECKS = (
    "content",
    "reasoning",
    "tool_calls",
    "tool_call_count",
    "reasoning_stripped",
    "content_stripped",
    "concat_reasoning",
    "no_content_delta_contains",
    "content_not_contains",
    "content_contains",
    "streamed_arguments_concat",
    "tool_call_indices",
    "content_or_tool_calls_nonempty",
)


def bug_checks(checks: dict[str, Any], got: ParseResult, deltas: list[Delta], mode: str) -> list[Failure]:
    """Bug-case expectation keys a parser can answer (others, e.g. finish_reason or ids, belong
    to the derender and are not checked here). ``""`` and ``null`` text are equal."""
    fails: list[Failure] = []
    actual: dict[str, Any] = {
        "content": _text(got.content),
        "reasoning": _text(got.reasoning),
        "tool_call_count": len(got.tool_calls),
        "reasoning_stripped": _text(got.reasoning).strip(),
        "content_stripped": _text(got.content).strip(),
        "concat_reasoning": _text(got.reasoning),
        "streamed_arguments_concat": got.tool_calls[0].arguments if got.tool_calls else None,
        "content_or_tool_calls_nonempty": bool(got.content or got.tool_calls),
    }
    if mode == "streaming":
        actual["tool_call_indices"] = sorted({c.index for d in deltas for c in d.tool_calls})
    for key, want in checks.items():
        if key == "tool_calls":
            fails += compare({"tool_calls": want}, got, "")
        elif key == "no_content_delta_contains":
            pieces = [d.content or "" for d in deltas] if mode == "streaming" else [_text(got.content)]
            fails += [(key, want, p) for p in pieces if want in p]
        elif key in ("content_contains", "content_not_contains"):
            if (want in _text(got.content)) != (key == "content_contains"):
                fails.append((key, want, got.content))
        elif key in actual:
            if (_text(want) if key in ("content", "reasoning") else want) != actual[key]:
                fails.append((key, want, actual[key]))
    return fails


def run(cases: list[Case], only_implemented: bool = False) -> tuple[int, int, list[str]]:
    """Run all cases in their modes; return (passed, failed, failure lines)."""
    passed, failed, lines = 0, 0, []
    for case in cases:
        if only_implemented and not implemented(case):
            continue
        for mode in case.modes:
            fails = run_case(case, mode)
            if fails == [NOT_IMPLEMENTED]:
                failed += 1
                lines.append(f"{case.id} [{mode}] parser not implemented ({case.reasoning}, {case.tool})")
            elif fails:
                failed += 1
                lines += [f"{case.id} [{mode}] {f}: expected {e!r} got {g!r}" for f, e, g in fails]
            else:
                passed += 1
    return passed, failed, lines


def select(cases: list[Case], parser: str | None) -> list[Case]:
    """Cases that use ``parser`` (as reasoning or tool parser); all when ``None``."""
    return cases if parser is None else [c for c in cases if parser in (c.reasoning, c.tool)]


def main(argv: Sequence[str] | None = None) -> int:
    """CLI entry point; exit status 1 when any case failed."""
    ap = argparse.ArgumentParser(prog="python -m parsers.conformance", description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="parser_cases.jsonl / bug_cases.jsonl style files")
    ap.add_argument("--parser", help="only cases that use this parser name")
    ap.add_argument("--only-implemented", action="store_true", help="skip cases of unimplemented parsers")
    args = ap.parse_args(argv)
    cases = apply_overrides(select([c for f in args.files for c in load(f)], args.parser))
    passed, failed, lines = run(cases, args.only_implemented)
    for line in lines:
        print(line)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
