"""``plamo3`` tool calls (PLaMo 3; vLLM 0.33 ``Plamo3EngineToolParser``).

Wire format (special tokens)::

    <|plamo:begin_tool_requests:plamo|>
    <|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|>
    <|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>{"city": "Paris"}
    <|plamo:end_tool_arguments:plamo|>
    <|plamo:end_tool_request:plamo|>
    <|plamo:end_tool_requests:plamo|>

* The name is the text between the name markers (held, at most ``NAME_LIMIT`` characters); the
  arguments are the text after ``<|plamo:begin_tool_arguments:plamo|>`` (and the optional
  ``<|plamo:constrain|>json<|plamo:msg|>``) up to the arguments' end marker, verbatim and
  streamed as they arrive, as vLLM 0.33 streams them (one fragment per token, measured with
  ``tools/record_parser_cases_with_vllm.py``); ``{}`` when empty (:class:`parsers.rawargs.RawArgs`).
* Content before the block is kept (trailing whitespace dropped when the block follows); text
  after the block is content. A block with no tool name (``S0`` holds it, markers included) is
  given back verbatim as content, never lost; so is a name never closed.
"""

from __future__ import annotations

from ..rawargs import RawArgs
from ..spec import BODY, CONTENT, DROP, HOLD, FormatSpec, Transition
from .json_factory import WHITESPACE


def _m(name: str) -> str:
    return f"<|plamo:{name}:plamo|>"


#: A tool name longer than this is not a name: its text is content (bounded state).
NAME_LIMIT = 512
_ARGS_PREFIX = (_m("begin_tool_arguments"), "<|plamo:constrain|>json<|plamo:msg|>")

SPEC = FormatSpec(
    name="plamo3",
    kind="tool",
    markers={
        "REQS": _m("begin_tool_requests"),
        "REQS_END": _m("end_tool_requests"),
        "REQ": _m("begin_tool_request"),
        "REQ_END": _m("end_tool_request"),
        "NAME": _m("begin_tool_name"),
        "NAME_END": _m("end_tool_name"),
        "ARGS": _m("begin_tool_arguments"),
        "ARGS_END": _m("end_tool_arguments"),
        "CONSTRAIN": "<|plamo:constrain|>",  # read by the body (RawArgs.skip); token kept
        "MSG": "<|plamo:msg|>",
    },
    # C: content, S0: a requests block before its first name (held), S: the block after a call
    # (dropped), H: a tool name, B: arguments.
    modes={"C": CONTENT, "S0": HOLD, "S": DROP, "H": HOLD, "B": BODY},
    transitions={
        ("C", "REQS"): Transition("S0", keep=True, release="drop"),
        ("S0", "NAME"): Transition("H", release="drop"),
        ("S0", "REQ"): Transition("S0", keep=True),
        ("S0", "REQ_END"): Transition("S0", keep=True),
        ("S0", "REQS_END"): Transition("C", keep=True, release="content"),
        ("S", "NAME"): Transition("H"),
        ("S", "REQS_END"): Transition("C"),
        ("H", "NAME_END"): Transition("S", route=True),
        ("H", "REQ_END"): Transition("S", release="content"),
        ("H", "REQS_END"): Transition("C", release="content"),
        ("B", "ARGS_END"): Transition("S"),
        ("B", "REQ_END"): Transition("S"),
        ("B", "REQS_END"): Transition("C"),
    },
    initial_mode="C",
    finish_release={"H": CONTENT, "S0": CONTENT},
    hold_limit={
        "H": (NAME_LIMIT, Transition("S", release="content")),
        "S0": (NAME_LIMIT, Transition("C", release="content")),
    },
    hold_trailing={"C": WHITESPACE},
    body=RawArgs(lambda header: (header.strip(), None), skip=_ARGS_PREFIX),
    body_end_mode="S",
    reject_mode="S",
    route=lambda header: "B",
)
