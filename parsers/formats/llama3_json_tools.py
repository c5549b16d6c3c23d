"""``llama3_json`` / ``llama4_json`` tool calls (Llama 3.1/3.2/3.3/4 JSON; vLLM 0.33
``Llama3JsonToolParser``, one class for both names).

Wire format: optional ``<|python_tag|>``, then ``{"name": "f", "arguments"|"parameters": {..}}``,
several joined by ``; ``; Llama 4 may wrap them in ``<|python_start|>…<|python_end|>`` (BR39).

Our one rule (batch == stream): a call may start at any ``{`` (vLLM batch: any ``{``
anywhere; vLLM streaming only when the output *starts* with ``<|python_tag|>`` or ``{`` — we
take the batch rule so prose-prefixed calls are found in both modes). Text before the first
call is content with its trailing whitespace dropped (vLLM batch drops it all, which a stream
cannot do without holding back every plain answer; we never retract sent text); text after a
call (``; `` separators, trailing prose, BR38) is dropped. ``tool_choice`` required/named
parse this same syntax (vLLM 0.33's ``llama`` structural tag makes the model write it). An
object without ``name`` or
without ``arguments``/``parameters`` is not a call and stays content; ``{`` in ordinary prose
is given back as content as soon as it cannot be a call. ``<|python_tag|>`` starts a call body
like ``<tool_call>``: dropped before a call, text where no call follows (vLLM 0.33 keeps
special-token text with a parser configured, and its batch gives an output without a call back
whole). The Llama 4 ``<|python_start|>``/``<|python_end|>`` markers are dropped.
"""

from __future__ import annotations

from .json_factory import json_tool_spec

SPEC = json_tool_spec(
    "llama3_json",
    starts=("<|python_tag|>",),
    opens=("{",),
    drops=("<|python_start|>", "<|python_end|>"),
    options={"require_args": True},
    # vLLM 0.33 constrains required/named with xgrammar's ``llama`` structural tag, so the model
    # writes its own ``{"name": .., "parameters": ..}`` calls, parsed natively
    guided_json=False,
)
