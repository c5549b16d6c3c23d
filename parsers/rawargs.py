"""Verbatim tool-call arguments between a header and a closing special token.

For formats whose call is ``HEADER <sep> ARGS <end>`` with special-token delimiters (Kimi K2,
DeepSeek V3/V3.1, Harmony): the engine collects the header in a hold mode, a routed
transition enters the body with the header text, and a marker transition from the body mode
closes it (see :mod:`parsers.spec`). Source of the behaviour: vLLM 0.33 ``KimiK2Parser``
(``raw_args.strip() or "{}"``), ``DeepSeekV3ToolParser``/``DeepSeekV31ToolParser`` (raw
argument slice), ``HarmonyParser`` (message content of a function-recipient message).

* The name (and a native id, if the header has one) is sent as soon as the body starts.
* Arguments are the raw text, streamed as it arrives, without leading/trailing ``trim``
  characters: trailing ones are withheld until more text shows they are inside the value,
  and dropped at the end (so a closing fence or spaces before the end token never leak).
* A body that ends with no argument text gets ``empty`` (``"{}"``).

State (JSON): ``nm`` name, ``id`` native id or ``None``, ``sent``, ``lead`` (still skipping
leading trim characters), ``tail`` (withheld trailing trim characters), ``any`` (arguments
sent).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .spec import Event

#: header text -> (name, native id or None), or None when the header names no call.
HeaderParser = Callable[[str], tuple[str, str | None] | None]


@dataclass(frozen=True, slots=True)
class RawArgs:
    """Body handler for verbatim arguments (see module docstring).

    Attributes:
        header: parses the header text handed to ``start``.
        trim: characters trimmed from both ends of the arguments.
        empty: arguments of a call whose body has no argument text.
    """

    header: HeaderParser
    trim: str = " \t\r\n"
    empty: str = "{}"

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body for the header ``marker``; an unparseable header uses it stripped as name."""
        parsed = self.header(marker) or (marker.strip(), None)
        return {"nm": parsed[0], "id": parsed[1], "sent": False, "lead": True, "tail": "", "any": False}

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Send the name once, then the new argument text minus withheld trim characters."""
        ev = self._name(st)
        if st["lead"]:
            text = text.lstrip(self.trim)
            st["lead"] = not text
        buf = st["tail"] + text
        keep = len(buf.rstrip(self.trim))
        if keep:
            ev.append(("args", buf[:keep]))
            st["any"] = True
        st["tail"] = buf[keep:]
        return ev, None

    def finish(self, st: dict[str, Any]) -> list[Event]:
        """End of the call: drop withheld trim characters; ``empty`` when nothing was sent."""
        ev = self._name(st)
        if not st["any"]:
            ev.append(("args", self.empty))
            st["any"] = True
        st["tail"] = ""
        return ev

    @staticmethod
    def _name(st: dict[str, Any]) -> list[Event]:
        if st["sent"]:
            return []
        st["sent"] = True
        return [("name", st["nm"], st["id"])]
