"""``qwen3_coder`` / ``qwen3_xml`` / ``step3p5`` tool calls (Qwen3-Coder, Qwen3.5/3.6 XML,
Nemotron 3, Step-3.5; vLLM 0.33 ``Qwen3EngineToolParser`` and ``Step3p5ToolParser``).

Wire format::

    content<tool_call>
    <function=get_weather>
    <parameter=city>
    Paris
    </parameter>
    </function>
    </tool_call>

* Values: one leading and one trailing newline trimmed, then coerced by the tool's JSON schema
  (integer/number/boolean/null/object/array, anyOf); untyped parameters stay strings (BR36);
  a value that fits no schema type stays the raw string (BR35).
* String values stream as JSON-escaped fragments; other values are sent when closed.
* A bare ``<function=`` without ``<tool_call>`` is a call; an unclosed ``<parameter=`` is closed
  by the next opener; a missing ``</tool_call>`` is accepted.
* Content before a call keeps its whitespace unless it is whitespace only, which a call
  drops, as vLLM's streaming does (its batch strips the content of an output with calls; ours
  must equal one of its answers, and a stream cannot take back what it sent); text after a
  call is content (BR32: vLLM's batch drops it while its streaming keeps it; we keep it in
  both).
* Calls to undeclared tools are kept (vLLM behaviour).
"""

from __future__ import annotations

from dataclasses import replace

from .xml_factory import qwen3_tags, xml_spec

SPEC = xml_spec("qwen3_coder", ("<tool_call>",), qwen3_tags(), bare=("<function=",), blank_only=True)

#: ``step5`` (Step-5; vLLM 0.33 ``Step5ToolParser``): the same grammar with the content's
#: whitespace kept when tools are called.
STEP5 = xml_spec("step5", ("<tool_call>",), qwen3_tags(), bare=("<function=",), strip=False)
#: ``mimo`` (Xiaomi MiMo; vLLM 0.33 ``MiMoToolParser``): the same grammar, but string values are
#: verbatim (the newlines around them kept; measured: ``"\\nParis\\n"``); schema types still apply.
MIMO = xml_spec("mimo", ("<tool_call>",), replace(qwen3_tags(), trim_newline=False), bare=("<function=",))
#: SGLang's ``qwen3_coder`` behaviour (alias ``nanbeige``): the whitespace between two call blocks
#: is content, and calls to undeclared tools are dropped.
SGLANG = replace(
    xml_spec("qwen3_coder", ("<tool_call>",), qwen3_tags(), bare=("<function=",), keep_between=True),
    drop_unknown_tools=True,
)
