"""``hermes`` tool calls (Hermes 2/3, Qwen2.5, QwQ, Qwen3 JSON; vLLM 0.33 ``Hermes2ProToolParser``).

Wire format: ``content<tool_call>{"name": "f", "arguments": {...}}</tool_call>`` one or more
times (whitespace/newlines around the JSON allowed).

* content = text before the first ``<tool_call>``; text after/between calls is dropped.
* Arguments stream as the raw JSON text of the ``arguments`` value; batch is the same text
  (vLLM batch re-serialises with ``json.dumps``: equal after ``json.loads``).
* A missing ``</tool_call>`` is accepted; a literal ``</tool_call>`` inside a JSON string does
  not end the call (BR26); a call without arguments gets ``{}`` (BR27).
* A body that is not a call object (invalid JSON, truncated before its arguments) is given
  back verbatim as content together with everything after it (never lose text).
* Calls to tools the request did not declare are kept (vLLM behaviour; SGLang drops them).
* Deliberate differences: ``"parameters"`` is accepted as the arguments key too; a call whose
  arguments are complete but whose object is not closed is kept (vLLM batch: whole text as
  content, its streaming: the call).
"""

from __future__ import annotations

import dataclasses

from ..jsoncalls import JsonCalls
from ..spec import BODY, CONTENT, DROP, FormatSpec, Transition


def hermes_spec(name: str, start: str = "<tool_call>", end: str = "</tool_call>") -> FormatSpec:
    """A hermes-style spec with its own markers (``longcat`` uses ``<longcat_tool_call>``)."""
    return FormatSpec(
        name=name,
        kind="tool",
        markers={"START": start, "END": end},
        modes={"C": CONTENT, "B": BODY, "A": DROP, "X": CONTENT},
        transitions={
            ("C", "START"): Transition("B"),
            ("A", "START"): Transition("B"),
            ("A", "END"): Transition("A"),
        },
        initial_mode="C",
        body=JsonCalls(),
        body_end_mode="A",
        reject_mode="X",
        body_options={"args_keys": ("arguments", "parameters")},
    )


# vLLM 0.33's hermes parser has a structural-tag model, so under `tool_choice` required/named the
# engine is held to the native `<tool_call>` syntax (render sends that structural tag) and the
# output is parsed natively, not as guided JSON.
SPEC = dataclasses.replace(hermes_spec("hermes"), guided_json=False)
