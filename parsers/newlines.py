"""Literal newline escapes written as text (MiniCPM-V: the model emits the two characters
``\\`` ``n``), turned into newlines outside code and LaTeX, incrementally.

Rules (vLLM 0.33 ``minicpmv``, measured in ``tests/parsers/cases/vllm033_measured.jsonl``):
``\\n``, ``\\r`` and ``\\r\\n`` become one newline; a run of two or more backslashes stays as
written; nothing changes inside inline code (`` ` ``), code blocks (```` ``` ````), ``$``/``$$``
math or ``\\(``/``\\[`` LaTeX spans, up to their closing marker. A tail that may still grow into
one of those sequences is held in the state until more text (or the end) decides.

State (JSON): ``{"cm": closing marker of the open span or None, "p": held tail}``.
"""

from __future__ import annotations

from typing import Any

_SPAN_OPENERS = (("```", "```"), ("`", "`"), ("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))


def start() -> dict[str, Any]:
    """A fresh state."""
    return {"cm": None, "p": ""}


def recover(st: dict[str, Any], text: str, final: bool) -> str:
    """The new text with its newline escapes recovered; ``final`` releases the held tail."""
    text, st["p"] = st["p"] + text, ""
    out: list[str] = []
    i = 0
    while i < len(text):
        rest = text[i:]
        close = st["cm"]
        if close is not None:
            if rest.startswith(close):
                out.append(close)
                i += len(close)
                st["cm"] = None
            elif not final and close.startswith(rest):
                st["p"] = rest
                break
            else:
                out.append(text[i])
                i += 1
            continue
        c = text[i]
        if c in "`$":
            if not final and rest in ("`", "``", "$"):
                st["p"] = rest
                break
            opener, closer = next(p for p in _SPAN_OPENERS if rest.startswith(p[0]))
            out.append(opener)
            i += len(opener)
            st["cm"] = closer
            continue
        if c != "\\":
            out.append(c)
            i += 1
            continue
        run = len(rest) - len(rest.lstrip("\\"))
        if run > 1:
            if not final and run == len(rest):
                st["p"] = rest  # the run's length decides what a following "n" means
                break
            out.append(rest[:run])
            i += run
            continue
        if not final and rest in ("\\", "\\r", "\\r\\"):
            st["p"] = rest
            break
        if rest.startswith("\\r\\n"):
            out.append("\n")
            i += 4
        elif rest.startswith(("\\n", "\\r")):
            out.append("\n")
            i += 2
        elif rest.startswith(("\\(", "\\[")):
            out.append(rest[:2])
            st["cm"] = "\\)" if rest[1] == "(" else "\\]"
            i += 2
        else:
            out.append("\\")
            i += 1
    if final and st["p"]:
        out.append(st["p"])
        st["p"] = ""
    return "".join(out)
