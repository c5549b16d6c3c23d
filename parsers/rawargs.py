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
* ``skip``: texts skipped, each only if present, in order, at the start of the arguments
  (PLaMo 3's ``<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>``);
  text that may still become one of them is held (``sk`` index of the next one, ``pb`` held).

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
    skip: tuple[str, ...] = ()

    def start(self, marker: str, options: Mapping[str, Any]) -> dict[str, Any]:
        """New body for the header ``marker``; an unparseable header uses it stripped as name."""
        parsed = self.header(marker) or (marker.strip(), None)
        st: dict[str, Any] = {"nm": parsed[0], "id": parsed[1], "sent": False, "lead": True}
        st.update(tail="", any=False)
        if self.skip:
            st.update(sk=0, pb="")
        return st

    def feed(self, st: dict[str, Any], text: str) -> tuple[list[Event], int | None]:
        """Send the name once, then the new argument text minus withheld trim characters."""
        ev = self._name(st)
        if st.get("sk") is not None:
            text = self._skipped(st, text)
            if st["sk"] is not None:
                return ev, None
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
        if st.get("sk") is not None:  # held text that was not a skipped prefix: arguments
            held, st["sk"], st["pb"] = st["pb"], None, ""
            ev += self.feed(st, held)[0]
        if not st["any"]:
            ev.append(("args", self.empty))
            st["any"] = True
        st["tail"] = ""
        return ev

    def _skipped(self, st: dict[str, Any], text: str) -> str:
        """Drop the ``skip`` texts at the start; hold text that may still be one of them."""
        buf, i = st["pb"] + text, st["sk"]
        while i < len(self.skip):
            want = self.skip[i]
            if buf.startswith(want):
                buf, i = buf[len(want) :], i + 1
            elif want.startswith(buf):
                st["sk"], st["pb"] = i, buf
                return ""
            else:
                i += 1
        st["sk"], st["pb"] = None, ""
        return buf

    @staticmethod
    def _name(st: dict[str, Any]) -> list[Event]:
        if st["sent"]:
            return []
        st["sent"] = True
        return [("name", st["nm"], st["id"])]
