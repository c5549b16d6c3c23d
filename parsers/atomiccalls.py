"""Atomic tool-call bodies: held whole until the block's closing marker, then parsed at once.

For formats whose arguments are not JSON text that can stream as it arrives (Gemma's compact
``call:f{k:v}``, Apertus ``[{"f": {...}}]``, Cohere actions, MiniMax M3 nested XML, Kimi K3
XTML, PLaMo 3 requests): the body text is held (the unsent part of an open call, as the
contract allows), and when the closing marker arrives (or the stream ends) the format's
``parse`` function turns it into calls. Every call is emitted whole (name, then its arguments
as one JSON fragment), so batch equals stream for any chunking. A body ``parse`` refuses
(``None``) is given back verbatim as content, its marker included: never lost.

State (JSON): ``raw`` (marker + body so far), ``n`` (length of the marker).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .spec import Event

#: body text (and, for a ``typed`` handler, the spec's ``tool_context`` value) ->
#: ``[(name, arguments)]`` (arguments a JSON-compatible value or a JSON text), or ``None`` when
#: the body is not a call block.
BodyParser = Callable[..., list[tuple[str, Any]] | None]


@dataclass(frozen=True, slots=True)
class AtomicCalls:
    """Body handler holding the body until its end (see module docstring).

    Attributes:
        parse: the format's body parser.
        empty_ok: a body that parses to no calls is accepted (its text is dropped) instead of
            given back as content.
        typed: ``parse`` also takes the request's tool context (the spec sets
            ``tool_context``; the engine passes it to ``feed``/``finish``).
    """

    parse: BodyParser
    empty_ok: bool = False
    typed: bool = False

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body; the marker is kept so a rejected body gives back all its text."""
        return {"raw": marker, "n": len(marker)}

    def feed(self, st: dict[str, Any], text: str, ctx: Any = None) -> tuple[list[Event], int | None]:
        """Hold the text until the closing marker."""
        st["raw"] += text
        return [], None

    def finish(self, st: dict[str, Any], ctx: Any = None) -> list[Event]:
        """Emit every call of the body, or reject it."""
        raw, body = st["raw"], st["raw"][st["n"] :]
        st["raw"], st["n"] = "", 0
        calls = self.parse(body, ctx) if self.typed else self.parse(body)
        if calls is None or (not calls and not self.empty_ok):
            return [("reject", raw)]
        events: list[Event] = []
        for name, args in calls:
            text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
            events += [("name", name), ("args", text)]
        return events
