"""``minicpm5`` tool calls (MiniCPM 5; vLLM 0.33 ``MiniCPM5XMLToolParser``).

Wire format: ``content<function name="get_weather"><param name="city">Paris</param></function>``,
one block per call, no outer wrapper.

* Values are verbatim text coerced by the tool's schema; content is stripped when tools are
  called; text after a call is content.
* Not modelled: vLLM's repair of byte-level tokenizer artefacts (``Ġ``/``Ċ``,
  ``<functionname=``).
"""

from __future__ import annotations

from ..xmlcalls import XmlTags
from .xml_factory import xml_spec

_QUOTED = r"""\s+name\s*=\s*(?:"([^"]*)"|'([^']*)')[^>]*"""
TAGS = XmlTags(
    block_end="</function>",
    call_head="<function",
    call_attr=_QUOTED,
    call_close=None,
    param_head="<param",
    param_attr=r"""\s+name\s*=\s*(?:"(?P<name>[^"]*)"|'(?P<sq>[^']*)')\s*""",
    param_close="</param>",
)
SPEC = xml_spec("minicpm5", (), TAGS, bare=("<function",))
