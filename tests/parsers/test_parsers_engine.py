"""Unit tests of the shared engine (parsers.machine) on small hand-written specs."""

from __future__ import annotations

import pytest

from parsers import machine
from parsers.spec import CONTENT, DROP, HOLD, REASONING, FormatSpec, Transition

MINI = FormatSpec(
    name="mini",
    kind="reasoning",
    markers={"START": "<think>", "END": "</think>"},
    modes={"R": REASONING, "C": CONTENT},
    transitions={("R", "START"): Transition("R"), ("R", "END"): Transition("C")},
    initial_mode="R",
    reasoning_modes=frozenset({"R"}),
)


def run(spec: FormatSpec, chunks: list[str]) -> tuple[list, dict]:
    st = machine.start(spec)
    events = []
    for chunk in chunks:
        events += machine.feed(spec, st, chunk)
    events += machine.finish(spec, st)
    return events, st


def joined(events: list, kind: str) -> str:
    return "".join(e[1] for e in events if e[0] == kind)


def test_marker_split_across_chunks_is_matched():
    """A marker arriving in pieces (`</th` + `ink>`) is recognised and never leaks as text."""
    events, _ = run(MINI, ["abc</th", "ink>x"])
    assert joined(events, "reasoning") == "abc"
    assert joined(events, "content") == "x"


def test_partial_marker_is_held_back_then_released():
    """A possible marker prefix is not emitted until the next chunk shows it is plain text."""
    st = machine.start(MINI)
    assert machine.feed(MINI, st, "a</thi") == [("reasoning", "a")]
    assert st["buf"] == "</thi"
    assert machine.feed(MINI, st, "s is text") == [("reasoning", "</this is text")]
    assert st["buf"] == ""


def test_partial_marker_flushed_at_finish():
    """A marker prefix still pending at end of stream is flushed as text of the mode (BR23)."""
    events, st = run(MINI, ["<think>abc</thi"])
    assert joined(events, "reasoning") == "abc</thi"
    assert st["buf"] == ""


def test_marker_without_transition_is_plain_text():
    """In content mode `<think>` has no transition, so it is content text."""
    events, _ = run(MINI, ["r</think>a<think>b</think>"])
    assert joined(events, "content") == "a<think>b</think>"


def test_adjacent_text_events_are_coalesced():
    """Consecutive text of one kind within a feed comes out as one event."""
    st = machine.start(MINI)
    assert machine.feed(MINI, st, "a<think>b") == [("reasoning", "ab")]


HOLDING = FormatSpec(
    name="holding",
    kind="reasoning",
    markers={"OPEN": "<c>", "CLOSE": "</c>", "END": "</r>"},
    modes={"R": REASONING, "H": HOLD, "A": HOLD, "C": CONTENT, "D": DROP},
    transitions={
        ("R", "OPEN"): Transition("H", keep=True),
        ("H", "CLOSE"): Transition("A", keep=True),
        ("A", "END"): Transition("C", release="reasoning"),
        ("R", "END"): Transition("C"),
        ("C", "END"): Transition("D"),
    },
    initial_mode="R",
    break_on_text={"A": Transition("R", release="reasoning")},
    finish_release={"H": CONTENT, "A": CONTENT},
)


def test_hold_released_as_reasoning_when_text_follows():
    """Held text goes to reasoning when non-whitespace text breaks the held mode."""
    events, st = run(HOLDING, ["x<c>1</c> \n y"])
    assert joined(events, "reasoning") == "x<c>1</c> \n y"
    assert st["mode"] == "R" and st["hold"] == ""


def test_hold_released_as_content_at_finish():
    """Held text still undecided at end of stream is released per `finish_release`."""
    events, _ = run(HOLDING, ["x<c>1", "</c>\n"])
    assert joined(events, "reasoning") == "x"
    assert joined(events, "content") == "<c>1</c>\n"


def test_release_on_transition_and_drop_sink():
    """A release transition emits the hold before switching; drop modes discard text."""
    events, _ = run(HOLDING, ["<c>1</c></r>ok</r>gone"])
    assert joined(events, "reasoning") == "<c>1</c>"
    assert joined(events, "content") == "ok"


def test_state_does_not_grow_with_plain_text():
    """Engine state holds no emitted text: its size is independent of the output length."""
    st = machine.start(MINI)
    machine.feed(MINI, st, "x" * 10_000)
    assert st == {"mode": "R", "buf": "", "hold": "", "body": None, "n": 0}


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"modes": {"R": "nowhere"}}, "unknown sinks"),
        ({"transitions": {("R", "START"): Transition("Z")}}, "unknown modes"),
        ({"transitions": {("R", "NOPE"): Transition("R")}}, "undefined markers"),
        ({"modes": {"R": "body"}}, "needs body"),
        ({"markers": {"START": ""}}, "empty marker"),
    ],
)
def test_invalid_specs_fail_at_construction(kwargs, message):
    """Inconsistent spec tables raise ValueError in __post_init__, naming the problem."""
    base = dict(
        name="bad",
        kind="reasoning",
        markers={"START": "<t>"},
        modes={"R": REASONING},
        transitions={},
        initial_mode="R",
    )
    with pytest.raises(ValueError, match=message):
        FormatSpec(**(base | kwargs))


def test_release_drop_discards_the_hold():
    """`release="drop"` throws held text away (e.g. whitespace-only content before a call)."""
    spec = FormatSpec(
        name="ws",
        kind="tool",
        markers={"CALL": "<c>"},
        modes={"W": HOLD, "C": CONTENT, "D": DROP},
        transitions={("W", "CALL"): Transition("D", release="drop"), ("C", "CALL"): Transition("D")},
        initial_mode="W",
        break_on_text={"W": Transition("C", release="content")},
        finish_release={"W": CONTENT},
    )
    assert run(spec, [" \n", "<c>x"])[0] == []
    assert joined(run(spec, [" \n", "hi<c>x"])[0], "content") == " \nhi"
    assert joined(run(spec, [" \n"])[0], "content") == " \n"
