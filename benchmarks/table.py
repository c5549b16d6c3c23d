"""Result rows, target checks, timing helpers and the printed table of the benchmark harness."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True)
class Row:
    """One measured line of the table.

    Attributes:
        section: harness section name (``floor``, ``render``, ``stream`` ...).
        name: what was measured.
        value: the median (or ratio, count ...) in ``unit``; ``None`` when skipped.
        unit: ``ms``, ``req/s``, ``x``, ``B``, ``MB``, ``s``.
        target: ``("<=", 3.0)`` style bound on ``value``, or ``None``.
        note: skip reason, command detail or extra figures.
    """

    section: str
    name: str
    value: float | None
    unit: str = "ms"
    target: tuple[str, float] | None = None
    note: str = ""

    @property
    def verdict(self) -> str:
        """``ok``/``MISS`` against the target, ``skip`` without a value, ``-`` without a target."""
        if self.value is None:
            return "skip"
        if self.target is None:
            return "-"
        op, bound = self.target
        good = self.value <= bound if op == "<=" else self.value >= bound
        return "ok" if good else "MISS"


@dataclass(slots=True)
class Results:
    """Rows collected in order; sections append, ``run`` prints."""

    rows: list[Row] = field(default_factory=list)

    def add(self, *args, **kwargs) -> Row:
        """Append a :class:`Row` built from the arguments and return it."""
        row = Row(*args, **kwargs)
        self.rows.append(row)
        return row

    def skip(
        self, section: str, name: str, reason: str, target: tuple[str, float] | None = None, unit: str = "ms"
    ) -> Row:
        """Append a skipped row with its reason."""
        return self.add(section, name, None, unit, target, f"skipped: {reason}")


def cpu_ms(fn: Callable[[], object], repeat: int, warmup: int = 1) -> float:
    """Median CPU time of ``fn()`` in ms (``time.process_time``: all threads of this process)."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(repeat):
        t0 = time.process_time()
        fn()
        samples.append(time.process_time() - t0)
    return median_ms(samples)


def cpu_ms_after(prepare: Callable[[], Any], measure: Callable[[Any], object], repeat: int) -> float:
    """Median CPU ms of ``measure(prepare())``, timing only ``measure`` (e.g. turn k+1 after turn k)."""
    samples = []
    for _ in range(repeat):
        state = prepare()
        t0 = time.process_time()
        measure(state)
        samples.append(time.process_time() - t0)
    return median_ms(samples)


def settle(max_wait: float = 30.0, quiet_ms: float = 5.0) -> None:
    """Wait until this process's background threads stop using CPU (e.g. an encoder built in a thread
    after the first request), so that ``process_time`` medians measure only the call under test."""
    deadline = time.perf_counter() + max_wait
    while time.perf_counter() < deadline:
        t0 = time.process_time()
        time.sleep(0.2)
        if (time.process_time() - t0) * 1e3 < quiet_ms:
            return


def median_ms(samples: list[float]) -> float:
    """Median of CPU samples given in seconds, in ms."""
    return statistics.median(samples) * 1e3


def fmt_value(value: float | None, unit: str) -> str:
    """Human figure: 3 significant digits, unit appended."""
    if value is None:
        return "-"
    if unit == "B":
        return f"{value:,.0f} B"
    return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:,.0f} {unit}"


def fmt_target(target: tuple[str, float] | None, unit: str) -> str:
    """``≤ 3 ms`` / ``≥ 1.7 x`` or empty."""
    if target is None:
        return ""
    op, bound = target
    return f"{'≤' if op == '<=' else '≥'} {fmt_value(bound, unit)}"


def render_table(rows: list[Row]) -> str:
    """The results as a fixed-width text table (one line per row, notes last)."""
    head = ("section", "measurement", "median", "target", "verdict", "note")
    body = [
        (r.section, r.name, fmt_value(r.value, r.unit), fmt_target(r.target, r.unit), r.verdict, r.note)
        for r in rows
    ]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(5)]
    lines = []
    for cells in [head, *body]:
        lines.append(
            "  ".join(str(c).ljust(w) for c, w in zip(cells[:5], widths, strict=True)) + "  " + cells[5]
        )
        if cells is head:
            lines.append("-" * (sum(widths) + 10 + len("note")))
    return "\n".join(lines)


def not_implemented(exc: BaseException) -> bool:
    """True when ``exc`` says the code under test is not written yet (NotImplementedError)."""
    return isinstance(exc, NotImplementedError)
