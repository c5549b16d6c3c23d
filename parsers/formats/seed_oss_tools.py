"""``seed_oss`` tool calls (Seed-OSS; vLLM 0.33 ``SeedOssEngineToolParser``): the Qwen3-Coder
XML body inside ``<seed:tool_call>`` … ``</seed:tool_call>`` (see ``qwen3_coder``).

A malformed opener such as ``<function=broken</function>`` drops only that call, not its
siblings (vLLM #46314). vLLM constrains no structural tag for it, so required/named tool
choice parse guided JSON.
"""

from __future__ import annotations

from .xml_factory import qwen3_tags, xml_spec

SPEC = xml_spec(
    "seed_oss",
    ("<seed:tool_call>",),
    qwen3_tags("</seed:tool_call>", "<seed:tool_call>"),
    bare=("<function=",),
    guided_json=True,
)
