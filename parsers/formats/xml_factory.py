"""Factory for XML-style tool-call formats (one :class:`parsers.xmlcalls.XmlCalls` body handler,
configured per family by an :class:`parsers.xmlcalls.XmlTags`).

Modes: ``C`` content, ``B`` call block (body), ``A`` after a block, ``D`` after a block when
text after it is dropped. Options (parsers.md sections 3, 9.5):

* ``strip``: content is stripped when tools are called (qwen3_coder, glm, minimax): trailing
  whitespace of content waits (``FormatSpec.hold_trailing``) and is dropped when a call follows;
  whitespace-only text between and after calls is dropped; text after a call is kept (BR32).
  Leading whitespace of content that is followed by text before the call is kept (a stream
  cannot know yet that a call will follow; vLLM's streaming keeps it too).
* ``keep_after=False``: text after the first block is dropped (DeepSeek DSML).
* ``bare``: call-opener heads that start a call without the block marker
  (``<function=``, ``<｜DSML｜invoke``).
* All of them are vLLM engine parsers: with ``tool_choice="none"`` the markup is still removed
  and only the calls are dropped (``strip_on_none``).
* ``guided_json``: False for the formats vLLM 0.33 constrains with structural tags
  (``structural_tag_model`` set): ``tool_choice`` required/named then parse the native syntax.
"""

from __future__ import annotations

from ..arguments import tool_types
from ..spec import ANY_WHITESPACE, BODY, CONTENT, DROP, HOLD, FormatSpec, Transition
from ..xmlcalls import XmlCalls, XmlTags


def xml_spec(
    name: str,
    starts: tuple[str, ...],
    tags: XmlTags,
    *,
    bare: tuple[str, ...] = (),
    strip: bool = True,
    keep_after: bool = True,
    guided_json: bool = False,
    typed: bool = True,
    drops: tuple[str, ...] = (),
    keep_between: bool = False,
    blank_only: bool = False,
) -> FormatSpec:
    """Build an XML-call spec: every marker in ``starts`` and ``bare`` opens a body; ``typed``
    coerces values by the request's tool schemas (else every value is a string); ``drops`` are
    wrapper markers dropped outside blocks (HY ``<tool_calls>``); ``keep_between``: whitespace
    between two blocks is content (SGLang's qwen3_coder returns the ``\\n`` between calls);
    ``blank_only`` (with ``strip``): the whitespace before the first call is dropped only when
    the content is whitespace alone (``FormatSpec.hold_blank_only``)."""
    markers = {f"S{i}": t for i, t in enumerate(starts)} | {f"F{i}": t for i, t in enumerate(bare)}
    markers["END"] = tags.block_end
    after = "A" if keep_after else "D"
    trans = {(m, k): Transition("B") for m in ("C", after) for k in markers if k != "END"}
    if keep_between:
        trans |= {(after, k): Transition("B", release="content") for k in markers if k != "END"}
    # the whitespace between a bare call's ``</function>`` and a block closer is syntax
    trans[(after, "END")] = Transition(after, release="drop")
    for i, text in enumerate(drops):
        markers[f"W{i}"] = text
        trans |= {(m, f"W{i}"): Transition(m) for m in ("C", after)}
    return FormatSpec(
        name=name,
        kind="tool",
        markers=markers,
        modes={"C": CONTENT, "B": BODY, "A": HOLD, "D": DROP},
        transitions=trans,
        initial_mode="C",
        break_on_text={"A": Transition("C", release="content")},
        finish_release={"C": CONTENT},
        body=XmlCalls(tags),
        body_end_mode=after,
        reject_mode="C",
        guided_json=guided_json,
        tool_context=tool_types if typed else None,
        hold_trailing={"C": ANY_WHITESPACE} if strip else {},
        hold_blank_only=blank_only,
        strip_on_none=True,
    )


def qwen3_tags(block_end: str = "</tool_call>", block_start: str = "<tool_call>") -> XmlTags:
    """Qwen3-Coder XML: ``<function=F><parameter=K>\\nV\\n</parameter></function>``; one leading
    and one trailing newline of each value trimmed; unclosed values/calls closed by the next
    opener."""
    return XmlTags(
        block_end=block_end,
        call_head="<function=",
        call_attr=r"\s*([^<>]*?)\s*",
        call_close="</function>",
        param_head="<parameter=",
        param_attr=r"\s*(?P<name>[^<>]*?)\s*",
        param_close="</parameter>",
        ignore=(block_start,),
        trim_newline=True,
    )
