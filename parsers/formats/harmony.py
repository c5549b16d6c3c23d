"""``openai_gptoss`` reasoning + ``openai`` tool calls: OpenAI Harmony (gpt-oss; vLLM 0.33
``HarmonyParser``, which drives ``openai_harmony.StreamableParser`` on token ids).

Wire format (markers are special tokens, kept as text by the derender)::

    <|channel|>analysis<|message|>thinking<|end|>
    <|start|>assistant<|channel|>commentary to=functions.F <|constrain|>json<|message|>{args}<|call|>
    <|start|>assistant<|channel|>final<|message|>answer<|return|>

The prompt ends with ``<|start|>assistant``, so the output starts inside the first header.
A message header (the text between ``<|start|>`` and ``<|message|>``) decides where its
content goes (:func:`route`):

* a function recipient ``to=functions.F`` (in the role part or after the channel) → a tool
  call ``F`` whose arguments are the raw message text, leading and trailing whitespace
  included (vLLM streams the same raw text; its batch re-serialises JSON: equal after
  ``json.loads``, and returns any other text raw);
* channel ``analysis`` → reasoning; ``final``, or ``commentary`` without recipient → content;
* anything else (built-in tools ``python``/``browser``/``container``, no channel) → dropped.

Messages of the same kind are joined with ``\\n`` (vLLM batch; its stream joins without a
separator — we use the batch form in both modes). A truncated message keeps its kind
(truncated analysis → reasoning, truncated final → content). A header still open at the end
of the stream (malformed tail) is returned as content, raw with its markers (vLLM recovers it
as final content on ``HarmonyError``); a "header" longer than :data:`HEADER_LIMIT` is
released as content at once, with everything after it. Inside a message, ``<|start|>``,
``<|channel|>`` and ``<|message|>`` are text of that message (only ``<|end|>``, ``<|call|>``,
``<|return|>`` end it: ``openai_harmony`` reads them so; vLLM 0.33 measured). Text between
``<|end|>`` and ``<|start|>`` is dropped (the Harmony parser skips such tokens). Reasoning is
"ended" from the start (vLLM's ``GptOssReasoningParser.is_reasoning_end`` is always true).

One spec serves both names: with both parsers configured it runs once (reasoning phase) and
its calls surface only when the tool phase is active (see ``Parser``).
"""

from __future__ import annotations

import re

from ..rawargs import RawArgs
from ..spec import BODY, CONTENT, DROP, HOLD, REASONING, FormatSpec, Transition

_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*([^\s<]+)")
_BUILTIN = frozenset({"python", "browser", "container"})


_HEADER_PARTS = re.compile(r"<\|(?:channel|constrain|message)\|>")


def recipient(header: str) -> str | None:
    """The recipient of a message header, if any: a ``to=`` anywhere in it, else the first word
    after the role and before ``<|channel|>`` (``openai_harmony`` reads the header's first word
    as the recipient with or without ``to=``: ``Hello<|channel|>final`` is a message to
    ``Hello``, which vLLM 0.33 then treats as a function call)."""
    m = _RECIPIENT.search(header)
    if m:
        return m.group(1)
    head = _HEADER_PARTS.split(header, 1)[0]
    if head.startswith("<|start|>"):  # a later header: its role comes first
        head = head[len("<|start|>"):].removeprefix("assistant")
    words = head.split()
    return words[0] if words else None


def is_function(name: str | None) -> bool:
    """vLLM's chat rule: ``functions.X``, or any bare recipient that is not ``assistant``, a
    built-in tool (``python``, ``browser.*``, ``container.*``) or a special token."""
    if not name or name.startswith("<|") or name == "assistant":
        return False
    if name.startswith("functions."):
        return len(name) > len("functions.")
    return name.split(".", 1)[0] not in _BUILTIN


def route(header: str) -> str | None:
    """Mode for the message whose header is ``header`` (see module docstring)."""
    if is_function(recipient(header)):
        return "T"
    m = _CHANNEL.search(header)
    channel = m.group(1) if m else None
    if channel == "analysis":
        return "R"
    if channel == "final" or (channel == "commentary" and recipient(header) is None):
        return "C"
    return None


def _call_name(header: str) -> tuple[str, None] | None:
    name = recipient(header)
    return (name.removeprefix("functions."), None) if name else None


#: A header longer than this is not a header: it and the rest of the output become content
#: (what vLLM returns at the end of such an output), keeping the state bounded.
HEADER_LIMIT = 512
_ENDS = ("END", "CALL", "RETURN")
_MESSAGES = ("R", "C", "I", "T")

SPEC = FormatSpec(
    name="openai_gptoss",
    kind="reasoning",
    markers={
        "START": "<|start|>",
        "CHANNEL": "<|channel|>",
        "CONSTRAIN": "<|constrain|>",
        "MESSAGE": "<|message|>",
        "END": "<|end|>",
        "CALL": "<|call|>",
        "RETURN": "<|return|>",
    },
    # H: header (held), R/C/T/I: reasoning, content, call arguments, ignored message,
    # W: between messages, X: a malformed tail (a "header" past HEADER_LIMIT) as content.
    modes={"H": HOLD, "R": REASONING, "C": CONTENT, "T": BODY, "I": DROP, "W": DROP, "X": CONTENT},
    transitions={
        ("H", "MESSAGE"): Transition("I", route=True),
        **{(m, e): Transition("W") for m in _MESSAGES for e in _ENDS},
        # only between messages: inside a message ``<|start|>`` is text of that message, as
        # ``openai_harmony.StreamableParser`` reads it (only END/CALL/RETURN end a message)
        ("W", "START"): Transition("H", keep=True),
    },
    initial_mode="H",
    finish_release={"H": CONTENT},
    # vLLM decodes the ids of a header that never completes whole (``HarmonyParser.flush`` on
    # ``HarmonyError``): a ``length`` cut inside a character keeps U+FFFD, batch and stream
    finish_partial=frozenset({"H"}),
    hold_limit={"H": (HEADER_LIMIT, Transition("X", release="content"))},
    # arguments exactly as generated, whitespace too: vLLM streams the raw message text and its
    # batch returns it raw unless it is JSON (then re-serialised: equal after ``json.loads``)
    body=RawArgs(_call_name, trim=""),
    body_end_mode="W",
    reject_mode="W",
    route=route,
    separators={CONTENT: "\n", REASONING: "\n"},
    guided_json=False,
)
