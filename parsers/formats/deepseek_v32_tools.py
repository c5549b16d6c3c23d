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


def dsml_tags(block_end: str, d: str = _D) -> XmlTags:
    """DSML tags closing the block with ``block_end``; ``d`` is the tag prefix (V4.1 spaces it:
    ``｜DSML｜ ``)."""
    return XmlTags(
        block_end=block_end,
        call_head=f"<{d}invoke",
        call_attr=r'\s+name="([^"]*)"\s*',
        call_close=f"</{d}invoke>",
        param_head=f"<{d}parameter",
        param_attr=r'\s+name="(?P<name>[^"]*)"(?:\s+string="(?P<string>[^"]*)")?\s*',
        param_close=f"</{d}parameter>",
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

#: ``deepseek_v41`` (DeepSeek-V4.1; vLLM 0.33 ``DeepSeekV41Parser``): V4's grammar with spaced
#: tags (``<｜DSML｜ calls>``, ``<｜DSML｜ invoke name="F">``, ``<｜DSML｜ parameter ...>``).
_D41 = f"{_D} "
V41 = xml_spec(
    "deepseek_v41",
    (f"<{_D41}calls>",),
    dsml_tags(f"</{_D41}calls>", _D41),
    bare=(f"<{_D41}invoke",),
    strip=False,
    keep_after=False,
)
