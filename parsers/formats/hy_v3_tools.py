"""``hy_v3`` / ``hy_v4`` tool calls (Tencent Hunyuan HY-V3 / HY-V4; vLLM 0.33 ``HYV3ToolParser`` /
``HYV4ToolParser``) and ``k2_horizon`` tool calls (K2 Horizon IFM; vLLM 0.33
``K2HorizonToolParser``): GLM-style key/value XML.

Wire formats::

    <tool_calls><tool_call>get_weather<tool_sep><arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call></tool_calls>

    <ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key><ifm|arg_type>string</ifm|arg_type><ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>

* The call name is the text at the start of the call block; values are verbatim and coerced by
  the tool's schema (the IFM ``arg_type`` tag is not read: the schema decides).
* Content is stripped when tools are called; the outer ``tool_calls`` wrapper is dropped.
* Checkpoints whose structural tokens carry a suffix (``<tool_call:6124c78e>``): HY-V4 reads it
  from the vocabulary, HY-V3 from the tokenizer config's ``token_suffix`` (``hunyuan_suffix``).
"""

from __future__ import annotations

import dataclasses
import functools

from ..spec import FormatSpec
from ..xmlcalls import XmlTags
from .hunyuan_suffix import suffix_for
from .xml_factory import xml_spec


def _kv_tags(prefix: str, close_prefix: str, ignore: tuple[str, ...]) -> XmlTags:
    return XmlTags(
        block_end=f"{close_prefix}tool_call>",
        call_head=None,
        call_attr="",
        call_close=None,
        param_head=f"{prefix}arg_key>",
        param_attr="",
        param_close=f"{close_prefix}arg_value>",
        key_close=f"{close_prefix}arg_key>",
        value_open=f"{prefix}arg_value>",
        ignore=ignore,
    )


@functools.cache
def _hy(name: str, suffix: str) -> FormatSpec:
    """The spec for a checkpoint whose structural tokens carry ``suffix`` (``""``: plain):
    ``<tool_call{suffix}>``, ``<arg_key{suffix}>`` ... (vLLM 0.33 HYV3/HYV4 tool parsers)."""
    wrap = (f"<tool_calls{suffix}>", f"</tool_calls{suffix}>")
    tags = dataclasses.replace(
        _kv_tags("<", "</", (*wrap, f"<tool_sep{suffix}>")),
        block_end=f"</tool_call{suffix}>",
        param_head=f"<arg_key{suffix}>",
        param_close=f"</arg_value{suffix}>",
        key_close=f"</arg_key{suffix}>",
        value_open=f"<arg_value{suffix}>",
    )
    spec = xml_spec(name, (f"<tool_call{suffix}>",), tags, drops=wrap)
    return dataclasses.replace(spec, adapt=lambda vocab, config: _hy(name, suffix_for(name, vocab, config)))


SPEC = _hy("hy_v3", "")
HY_V4 = _hy("hy_v4", "")
_IFM = _kv_tags(
    "<ifm|", "</ifm|", ("<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|arg_type>", "</ifm|arg_type>")
)
K2_HORIZON = xml_spec(
    "k2_horizon", ("<ifm|tool_call>",), _IFM, drops=("<ifm|tool_calls>", "</ifm|tool_calls>")
)
