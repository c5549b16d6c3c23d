"""``glm45`` / ``glm47`` tool calls (GLM-4.5/4.6/4.7/5; vLLM 0.33 ``Glm47MoeModelToolParser``).

Wire format: ``<tool_call>NAME[\\n]<arg_key>K</arg_key>[\\n]<arg_value>V</arg_value>…</tool_call>``
(GLM-4.7 writes no newlines). Values are verbatim (surrounding whitespace is data) and coerced
by the schema; calls to tools the request did not declare are dropped; content is stripped
when tools are called; required/named tool choice parse this native syntax.
"""

from __future__ import annotations

from ..xmlcalls import XmlTags
from .xml_factory import xml_spec

TAGS = XmlTags(
    block_end="</tool_call>",
    call_head=None,
    call_attr="",
    call_close=None,
    param_head="<arg_key>",
    param_attr="",
    param_close="</arg_value>",
    key_close="</arg_key>",
    value_open="<arg_value>",
    validate=True,
)

SPEC = xml_spec("glm45", ("<tool_call>",), TAGS)
