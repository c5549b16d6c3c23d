"""``dots`` tool calls (rednote dots.llm; vLLM 0.33 ``DotsToolParser``) and ``muse`` /
``musespark1x`` / ``muse_glimmer`` tool calls (Muse ATEM; vLLM 0.33 ``MuseToolParser``): the
MiniMax-style ``invoke``/``parameter`` XML inside a family block.

Wire formats::

    <dots_function_call>
    <invoke name="search">
    <parameter name="query">weather in Shanghai</parameter>
    </invoke>
    </dots_function_call>

    <atem:function_calls>
    <atem:invoke name="tool.fn">
    <atem:parameter name="arg">value</atem:parameter>
    </atem:invoke>
    </atem:function_calls>

* Values are verbatim text coerced by the tool's JSON schema; several ``invoke`` per block.
* Content is stripped when tools are called; text after a block is content.
* Not modelled: Dots' JSON-object body variant (``{"name": .., "arguments": ..}`` in the block).
"""

from __future__ import annotations

from dataclasses import replace

from .minimax_m2_tools import TAGS as MINIMAX_TAGS
from .xml_factory import xml_spec

DOTS_TAGS = replace(
    MINIMAX_TAGS, block_end="</dots_function_call>", ignore=("<dots_function_call>",), validate=False
)
SPEC = xml_spec("dots", ("<dots_function_call>",), DOTS_TAGS)

MUSE_TAGS = replace(
    MINIMAX_TAGS,
    block_end="</atem:function_calls>",
    call_head="<atem:invoke",
    call_close="</atem:invoke>",
    param_head="<atem:parameter",
    param_close="</atem:parameter>",
    ignore=("<atem:function_calls>",),
    validate=False,
)
MUSE = xml_spec("muse", ("<atem:function_calls>",), MUSE_TAGS)
