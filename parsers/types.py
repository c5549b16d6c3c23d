"""Public value types of the parser library: what goes in and what comes out.

The library turns the text of one model output (special tokens kept) into OpenAI-shaped
pieces: ``content``, ``reasoning`` and ``tool_calls``. It is usable without the web app.

Shapes (see :class:`parsers.Parser`):

* ``Parser.start(ctx, prompt_token_ids) -> state``: a plain JSON-compatible value
  (``dict`` of str/int/bool/list/None) that the caller may serialise and carry between
  requests. Its size does not grow with the output, except while a tool call is open.
* ``Parser.feed(state, text, token_ids) -> (state, list[Delta])``: one incremental step with
  the *new* text and token ids only. Cost is proportional to ``len(text)`` (plus a held-back
  marker prefix), never to the output so far. ``feed(..., in_place=True)`` (and ``finish``) advance
  a state the caller owns instead of copying it first.
* ``Parser.finish(state) -> (state, list[Delta])``: end of stream; flushes held-back text and
  withheld argument suffixes.
* ``Parser.parse(ctx, prompt_token_ids, text, token_ids) -> ParseResult``: batch parse.

Streaming law: for any split of an output into chunks, the joined deltas of ``feed``/``finish``
equal ``parse`` (content, reasoning, each call's name and arguments), except where a format
documents a deliberate batch/stream difference.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class ParseContext:
    """Per-request inputs that change how an output is parsed.

    Mirrors vLLM 0.33's ``ParseContext`` (``parse_context`` in ``GenerateRequest``).

    Attributes:
        tools: the request's OpenAI ``tools`` list (``[{"type": "function", "function": {...}}]``)
            or ``None``.
        tool_choice: ``"none"``, ``"auto"``, ``"required"`` or a named choice
            ``{"type": "function", "function": {"name": ...}}``.
        parallel_tool_calls: ``False`` keeps only the first tool call (index 0).
        include_reasoning: ``False`` drops reasoning from every delta and the result.
        chat_template_kwargs: the merged template kwargs (``enable_thinking``, ``thinking``,
            ``reasoning_effort`` ...); reasoning parsers read their switches here.
        history_tool_call_cnt: tool calls already in the conversation history (Kimi ids).
        enable_auto_tool_choice: the server's ``--enable-auto-tool-choice``.
        structured_output: the request asked for structured output (``response_format``
            ``json_object``/``json_schema``/``structural_tag``, or ``structured_outputs``): an
            output without reasoning markers is then content (reasoning specs start undecided).
    """

    tools: tuple[dict[str, Any], ...] | None = None
    tool_choice: str | dict[str, Any] = "auto"
    parallel_tool_calls: bool = True
    include_reasoning: bool = True
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    history_tool_call_cnt: int = 0
    enable_auto_tool_choice: bool = True
    structured_output: bool = False


@dataclass(frozen=True, slots=True)
class ToolCallDelta:
    """A piece of one tool call in a stream (OpenAI ``delta.tool_calls[i]``).

    The first piece of a call carries ``name`` (complete, exactly once) and may carry an ``id``
    when the format defines one (Kimi ``functions.<name>:<n>``, Mistral 9-char ids); later
    pieces carry only ``arguments`` fragments. Joining all fragments of one ``index`` gives the
    final JSON arguments string.
    """

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str | None = None


@dataclass(frozen=True, slots=True)
class Delta:
    """One step's output: new content and reasoning text and tool-call pieces."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCallDelta, ...] = ()


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A complete tool call of a batch result. ``arguments`` is a JSON string."""

    name: str
    arguments: str
    id: str | None = None


@dataclass(frozen=True, slots=True)
class ParseResult:
    """Batch parse result (OpenAI ``message`` fields). Empty text is ``None``."""

    content: str | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()


class UnsupportedRequest(ValueError):
    """The request's parse inputs are refused by the format (``Parser.start``): vLLM 0.33 raises
    ``ValueError`` when it builds the request's parser (e.g. ``k2_horizon`` with a
    ``reasoning_effort`` other than high/medium/low), which its render and derender answer
    with a 400; callers map this to a 400 with the same message."""
