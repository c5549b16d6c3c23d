"""DeepSeek DSML tool calls: ``deepseek_v32`` (DeepSeek-V3.2) and ``deepseek_v4`` (vLLM 0.33
``DeepSeekV32Parser`` / ``DeepSeekV4Parser`` tool side).

Wire format::

    content<｜DSML｜function_calls>
    <｜DSML｜invoke name="F">
    <｜DSML｜parameter name="K" string="true">V</｜DSML｜parameter>
    </｜DSML｜invoke>
    </｜DSML｜function_calls>

V4 uses ``<｜DSML｜tool_calls>`` (also ``<｜DSML｜toolcalls>``, ``<｜DSML｜tool>``); there the V3.2
wrapper is plain content, and an ``invoke`` without a wrapper is still a call.

* ``string="true"`` values are raw text; other values (``string="false"`` or no attribute) are
  JSON-decoded when possible; then all are coerced by the schema (even ``string="true"``).
* A lone undeclared ``arguments``/``input`` parameter whose object fits the schema is unwrapped.
* Content before the block is kept verbatim (not stripped); text after the block is dropped.
"""

from __future__ import annotations

from ..xmlcalls import XmlTags
from .xml_factory import xml_spec

_D = "｜DSML｜"


def dsml_tags(block_end: str) -> XmlTags:
    """DSML tags closing the block with ``block_end``."""
    return XmlTags(
        block_end=block_end,
        call_head=f"<{_D}invoke",
        call_attr=r'\s+name="([^"]*)"\s*',
        call_close=f"</{_D}invoke>",
        param_head=f"<{_D}parameter",
        param_attr=r'\s+name="(?P<name>[^"]*)"(?:\s+string="(?P<string>[^"]*)")?\s*',
        param_close=f"</{_D}parameter>",
        string_attr=True,
        unwrap=("arguments", "input"),
    )


V32 = xml_spec(
    "deepseek_v32",
    (f"<{_D}function_calls>",),
    dsml_tags(f"</{_D}function_calls>"),
    bare=(f"<{_D}invoke",),
    strip=False,
    keep_after=False,
)
V4 = xml_spec(
    "deepseek_v4",
    (f"<{_D}tool_calls>", f"<{_D}toolcalls>", f"<{_D}tool>"),
    dsml_tags(f"</{_D}tool_calls>"),
    bare=(f"<{_D}invoke",),
    strip=False,
    keep_after=False,
)
