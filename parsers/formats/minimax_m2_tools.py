"""``minimax_m2`` tool calls (MiniMax-M2/M2.1; vLLM 0.33 ``MinimaxM2ToolParser``).

Wire format: ``<minimax:tool_call><invoke name="F"><parameter name="K">V</parameter></invoke>…
</minimax:tool_call>``; names double-, single- or un-quoted. Values verbatim, coerced by the
schema (no tools → strings); undeclared tool names dropped; content stripped when tools are
called.
"""

from __future__ import annotations

from ..xmlcalls import XmlTags
from .xml_factory import xml_spec

_NAME = r"""\s+name\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>]+))\s*"""

TAGS = XmlTags(
    block_end="</minimax:tool_call>",
    call_head="<invoke",
    call_attr=_NAME,
    call_close="</invoke>",
    param_head="<parameter",
    param_attr=r"""\s+name\s*=\s*(?:"(?P<name>[^"]*)"|'(?P<sq>[^']*)'|(?P<bare>[^\s"'>]+))\s*""",
    param_close="</parameter>",
    ignore=("<minimax:tool_call>",),
    validate=True,
)

SPEC = xml_spec("minimax_m2", ("<minimax:tool_call>",), TAGS)
