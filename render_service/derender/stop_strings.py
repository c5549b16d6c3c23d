"""Stop strings over streamed text: a pure ``step``/``flush`` pair with hold-back.

Tokens-only engines reject ``stop`` (upstream §4 check 4), so derender enforces it on the
detokenized text. Text that may be the start of a stop string is held back until decided
(bug cases BR13, BR14), so nothing is ever sent and later retracted. The carried state is the
held text only (shorter than the longest stop string).

Matching follows vLLM's ``check_stop_strings``: among matches, the one that *ends* earliest
wins, ties broken by list order; the text is cut before the stop string unless
``include_stop_str_in_output``. Because every undecided character is held, the first match a
stream finds is the same one a single pass over the whole text finds (batch == stream).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StopMatch:
    """A stop string was found: ``text`` is what is still to be emitted (cut, or up to and
    including the stop string), ``stop`` the matched string."""

    text: str
    stop: str


def _earliest_match(buf: str, stops: Sequence[str]) -> tuple[int, str] | None:
    best: tuple[int, int, str] | None = None
    for stop in stops:
        at = buf.find(stop)
        if at >= 0 and (best is None or at + len(stop) < best[0]):
            best = (at + len(stop), at, stop)
    return None if best is None else (best[1], best[2])


def _held_suffix_len(buf: str, stops: Sequence[str]) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of some stop string."""
    longest = max((len(s) for s in stops), default=0)
    for size in range(min(len(buf), longest - 1), 0, -1):
        tail = buf[-size:]
        if any(s.startswith(tail) for s in stops):
            return size
    return 0


def step(held: str, text: str, stops: Sequence[str], include_stop: bool) -> tuple[str, str, StopMatch | None]:
    """Feed new text. Returns ``(emit, held, match)``: text safe to send now, the text held
    back, and the match when a stop string completed (then ``held`` is ``""`` and the output
    is over). Cost O(len(held + text) · len(stops)).
    """
    if not stops:
        return held + text, "", None
    buf = held + text
    found = _earliest_match(buf, stops)
    if found is not None:
        at, stop = found
        cut = at + len(stop) if include_stop else at
        return "", "", StopMatch(text=buf[:cut], stop=stop)
    keep = _held_suffix_len(buf, stops)
    return buf[: len(buf) - keep], buf[len(buf) - keep :], None


def flush(held: str) -> str:
    """End of output: held text did not become a stop string, so it is released."""
    return held


def normalize(stop: str | Sequence[str] | None) -> tuple[str, ...]:
    """The request's ``stop`` as a tuple of non-empty strings (as ``SamplingParams`` does)."""
    if not stop:
        return ()
    if isinstance(stop, str):
        return (stop,)
    return tuple(s for s in stop if s)
