"""``deepseek_v3`` and ``deepseek_v31`` tool calls (DeepSeek-V3 / R1-0528 and V3.1; vLLM 0.33
``DeepSeekV3ToolParser`` / ``DeepSeekV31ToolParser``).

Wire formats (markers are special tokens)::

    v3:  <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
         ```json
         {args}
         ```<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
    v31: <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{args}<｜tool▁call▁end｜>...
         <｜tool▁calls▁end｜>

* Arguments are verbatim (no re-serialisation), streamed raw; the ```` ```json ```` fence and
  surrounding whitespace are not part of them.
* Content: v3 keeps the text before **and after** the block (``prefix + suffix``), v31 only
  the text before (after the block is dropped). Text between calls is dropped.
* A call marker outside a ``<｜tool▁calls▁begin｜>`` block is plain content (vLLM looks for
  the block token first). A missing ``<｜tool▁call▁end｜>`` is accepted: the next call or the
  block end closes the call (and the end of the stream does).
* A malformed call (no ``<｜tool▁sep｜>``, no fence, a header that never ends) gives its text
  back as content, from its ``<｜tool▁call▁begin｜>`` on (vLLM v3 batch reports "tools called"
  with an empty list, xfail upstream, and its streaming drops the text: nothing is lost here).
"""

from __future__ import annotations

from ..rawargs import RawArgs
from ..spec import BODY, CONTENT, DROP, HOLD, FormatSpec, Transition

CALLS_BEGIN = "<｜tool▁calls▁begin｜>"
CALLS_END = "<｜tool▁calls▁end｜>"
CALL_BEGIN = "<｜tool▁call▁begin｜>"
CALL_END = "<｜tool▁call▁end｜>"
SEP = "<｜tool▁sep｜>"


#: A call header longer than this is noise: the call is skipped (bounded state).
HEADER_LIMIT = 512


def _name(header: str) -> tuple[str, None] | None:
    """The call name of a held header ``<｜tool▁call▁begin｜>[type<｜tool▁sep｜>]NAME``."""
    name = header.removeprefix(CALL_BEGIN).rpartition(SEP)[2].strip()
    return (name, None) if name else None


def _route(header: str) -> str | None:
    return "B" if _name(header) else None


def _spec(name: str, *, v3: bool) -> FormatSpec:
    """v3: ``type<sep>NAME\\n```json`` header, content after the block kept; v31: ``NAME<sep>``."""
    markers = {"CALLS": CALLS_BEGIN, "CALLS_END": CALLS_END, "CALL": CALL_BEGIN, "END": CALL_END, "SEP": SEP}
    trans = {
        ("C", "CALLS"): Transition("S"),
        ("S", "CALL"): Transition("H", keep=True),
        ("S", "CALLS_END"): Transition("A"),
        ("A", "CALLS"): Transition("S"),
        ("B", "END"): Transition("S"),
        ("B", "CALL"): Transition("H", keep=True),
        ("B", "CALLS_END"): Transition("A"),
        ("H", "END"): Transition("S", release="content"),
        ("H", "CALLS_END"): Transition("A", release="content"),
    }
    modes = {"C": CONTENT, "S": DROP, "H": HOLD, "B": BODY, "A": CONTENT if v3 else DROP}
    if v3:  # "function<sep>" then the name up to the fence
        markers["FENCE"] = "```json"
        modes["N"] = HOLD
        trans |= {
            ("H", "SEP"): Transition("N", keep=True),
            ("N", "FENCE"): Transition("S", route=True),
            ("N", "END"): Transition("S", release="content"),
            ("N", "CALLS_END"): Transition("A", release="content"),
        }
    else:
        trans[("H", "SEP")] = Transition("S", route=True)
    return FormatSpec(
        name=name,
        kind="tool",
        markers=markers,
        modes=modes,
        transitions=trans,
        initial_mode="C",
        body=RawArgs(_name, trim=" \t\r\n`" if v3 else " \t\r\n"),
        body_end_mode="S",
        reject_mode="S",
        route=_route,
        hold_limit={m: (HEADER_LIMIT, Transition("S", release="content")) for m in ("H", "N") if m in modes},
        finish_release={m: CONTENT for m in ("H", "N") if m in modes},
    )


SPEC = _spec("deepseek_v3", v3=True)
SPEC_V31 = _spec("deepseek_v31", v3=False)
