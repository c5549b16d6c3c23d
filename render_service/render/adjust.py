"""What vLLM 0.33's parsers change in a chat request before its sampling params are built
(``Parser.adjust_request``), and the template kwargs vLLM echoes in ``parse_context`` /
``reasoning_parser_kwargs``.

``skip_special_tokens`` (recorded in ``tests/goldens/render_*.json``): reasoning parsers built on
vLLM's parser engine set it to ``False`` on every request; a tool parser whose markers may be
special tokens sets it to ``False`` when the request has tools and ``tool_choice`` is not
``"none"``; harmony (gpt-oss), ``llama3_json``, ``deepseek_r1``, the pythonic parsers and the
others leave the request's value.
"""

from __future__ import annotations

import json
from typing import Any

from ..protocol.chat import ChatCompletionRequest
from ..settings import Settings

#: vLLM reasoning parsers (engine adapters) whose ``adjust_request`` always keeps special tokens.
REASONING_KEEPS_SPECIAL = frozenset(
    {
        "deepseek_v4",
        "gemma4",
        "glm45",
        "glm47",
        "kimi_k2",
        "kimi_k3",
        "minimax_m2",
        "minimax_m2_append_think",
        "mistral",
        "nemotron_v3",
        "qwen3",
        "seed_oss",
        "step3p5",
    }
)
#: vLLM tool parsers that keep special tokens when tools are given and ``tool_choice`` is not none.
TOOLS_KEEP_SPECIAL = frozenset(
    {
        "deepseek_v32",
        "deepseek_v4",
        "gemma4",
        "gigachat3",
        "glm45",
        "glm47",
        "granite4",
        "hermes",
        "internlm",
        "jamba",
        "kimi_k2",
        "lfm2",
        "minimax_m2",
        "mistral",
        "qwen3_coder",
        "qwen3_json",
        "qwen3_xml",
        "seed_oss",
        "step3",
        "step3p5",
    }
)

#: Values vLLM's ``merge_kwargs`` treats as unset.
_UNSET = (None, "auto")


def keeps_special_tokens(
    settings: Settings, tools: list[dict[str, Any]] | None, tool_choice: Any, harmony: bool
) -> bool:
    """Whether the configured parsers set ``skip_special_tokens=False`` (see module docstring)."""
    if harmony:
        return False
    if settings.reasoning_parser in REASONING_KEEPS_SPECIAL:
        return True
    return bool(settings.tool_call_parser in TOOLS_KEEP_SPECIAL and tools and tool_choice != "none")


def _merge(defaults: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    return {**defaults, **{k: v for k, v in overrides.items() if v not in _UNSET}}


def effective_template_kwargs(req: ChatCompletionRequest, settings: Settings) -> dict[str, Any]:
    """The chat template kwargs vLLM reports for a request (``effective_chat_template_kwargs``):
    the server defaults (``--default-chat-template-kwargs`` and ``cohere_format`` from
    ``--cohere-format``) under the request's ``chat_template_kwargs``, under the request's
    ``add_generation_prompt``, ``continue_final_message``, ``documents`` and ``reasoning_effort``
    (after ``--reasoning-effort-map``; it also sets ``enable_thinking`` unless the request did);
    ``None`` and ``"auto"`` values count as unset."""
    defaults = dict(settings.default_chat_template_kwargs)
    if settings.cohere_format:
        defaults.setdefault("cohere_format", settings.cohere_format)
    effort = req.reasoning_effort
    if effort is not None:
        effort = settings.reasoning_effort_map.get(effort, effort)
    own = dict(req.chat_template_kwargs or {})
    extra: dict[str, Any] = {
        "add_generation_prompt": req.add_generation_prompt,
        "continue_final_message": req.continue_final_message,
        "documents": req.documents,
        "reasoning_effort": effort,
    }
    if effort is not None and "enable_thinking" not in own:
        extra["enable_thinking"] = effort != "none"
    return _merge(defaults, _merge(own, extra))


# --- structured outputs for tool calling (vLLM 0.33 tool parsers' structural tags) -------------

#: Hermes-style tool parsers: each call is one of these ``(begin, end)`` tag pairs around the
#: arguments JSON, ``{name}`` replaced by the tool name.
_HERMES_TAGS = (
    ('<tool_call>\n{{"name": "{name}", "arguments": ', "}\n</tool_call>"),
    ('<tool_call>{{"name": "{name}", "arguments": ', "}</tool_call>"),
)
STRUCTURAL_TAG_PARSERS = frozenset({"hermes", "qwen3_json"})
BUILTIN_TAG_PARSERS = frozenset({"llama3_json", "llama4_json", "qwen3_coder", "openai"})
JSON_ARRAY_PARSERS = frozenset({"mistral"})


def empty_structured_outputs() -> dict[str, Any]:
    """vLLM's ``StructuredOutputsParams`` as serialised, every constraint unset."""
    return {
        "_backend": None,
        "_backend_was_auto": False,
        "choice": None,
        "disable_additional_properties": False,
        "disable_any_whitespace": False,
        "grammar": None,
        "json": None,
        "json_object": None,
        "regex": None,
        "structural_tag": None,
        "whitespace_pattern": None,
    }


def _tag_content(fn: dict[str, Any], strict_schema: bool) -> dict[str, Any]:
    schema: Any = True
    if strict_schema:
        schema = fn.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "json_schema",
        "json_schema": schema,
        "style": "json",
        "any_order": False,
        "max_whitespace_cnt": None,
        "excludes": [],
    }


def _hermes_tags(chosen: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "tag", "begin": begin.format(name=fn["name"]),
         "content": _tag_content(fn, bool(fn.get("strict"))), "end": end}
        for fn in chosen
        for begin, end in _HERMES_TAGS
    ]


def _hermes_format(chosen: list[dict[str, Any]], mode: str, parallel: bool) -> dict[str, Any]:
    tags = _hermes_tags(chosen)
    if mode == "auto":
        return {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": tags,
                "at_least_one": False, "stop_after_first": not parallel, "excludes": []}
    return {"type": "tags_with_separator", "tags": tags, "separator": "", "at_least_one": True,
            "stop_after_first": mode == "forced" or not parallel}


#: xgrammar's builtin formats vLLM 0.33 asks for (``structural_tag_model`` ``llama`` and
#: ``qwen_3_coder``): ``(trigger, begin with {name}, end, content style)`` of one call.
_BUILTIN_TAGS = {
    "llama3_json": ('{"name": ', '{{"name": "{name}", "parameters": ', "}", "json"),
    "llama4_json": ('{"name": ', '{{"name": "{name}", "parameters": ', "}", "json"),
    "qwen3_coder": ("<tool_call>\n<function=", "<tool_call>\n<function={name}>\n",
                    "\n</function>\n</tool_call>", "qwen_xml"),
}
_THINK_EXCLUDES = ["<think>", "</think>"]


def _builtin_format(
    parser: str, chosen: list[dict[str, Any]], mode: str, parallel: bool
) -> dict[str, Any]:
    trigger, begin, end, style = _BUILTIN_TAGS[parser]
    tags = [{"type": "tag", "begin": begin.format(name=fn["name"]),
             "content": {**_tag_content(fn, bool(fn.get("strict"))), "style": style}, "end": end}
            for fn in chosen]
    if mode == "forced":
        return tags[0]
    return {"type": "triggered_tags", "triggers": [trigger], "tags": tags,
            "at_least_one": mode == "required", "stop_after_first": not parallel,
            "excludes": list(_THINK_EXCLUDES)}


# --- gpt-oss (Harmony): vLLM 0.33 ``parser/harmony.py`` ``get_harmony_structural_tag`` -----------

_HARMONY_CONSTRAINS = (" json", " <|constrain|>json")
_HARMONY_END = ["<|end|>", ""]  # "" stands for the stop tokens <|return|> / <|call|>
_HARMONY_CHANNELS = ("<|channel|>commentary", "<|channel|>analysis", "<|channel|>final")
_HARMONY_CALL_BEGINS = (" to=functions.{name}{channel}{constrain}<|message|>",
                        "{channel} to=functions.{name}{constrain}<|message|>")
_HARMONY_FINAL = "<|channel|>final{constrain}<|message|>"


def _any_text() -> dict[str, Any]:
    return {"type": "any_text", "excludes": [], "max_tokens": None, "max_chars": None}


def _harmony_preamble(channel: str) -> dict[str, Any]:
    return {"type": "optional", "content": {"type": "sequence", "elements": [
        {"type": "tag", "begin": f"<|channel|>{channel}<|message|>", "content": _any_text(),
         "end": "<|end|>"},
        {"type": "const_string", "value": "<|start|>assistant"}]}}


def _harmony_sequence(content: dict[str, Any], commentary: bool = True) -> dict[str, Any]:
    """An optional analysis message (and commentary preamble), then ``content``."""
    elements = [_harmony_preamble("analysis")] + ([_harmony_preamble("commentary")] if commentary else [])
    return {"type": "sequence", "elements": [*elements, content]}


def _harmony_format(chosen: list[dict[str, Any]], mode: str) -> dict[str, Any]:
    tags: list[dict[str, Any]] = [
        {"type": "tag", "begin": pattern.format(name=fn["name"], channel=channel, constrain=constrain),
         "content": _tag_content(fn, bool(fn.get("strict"))), "end": list(_HARMONY_END)}
        for fn in chosen
        for pattern in _HARMONY_CALL_BEGINS
        for constrain in _HARMONY_CONSTRAINS
        for channel in _HARMONY_CHANNELS
    ]
    if mode == "auto":
        tags += [{"type": "tag", "begin": _HARMONY_FINAL.format(constrain=constrain),
                  "content": _any_text(), "end": list(_HARMONY_END)}
                 for constrain in (*_HARMONY_CONSTRAINS, "")]
    return _harmony_sequence({"type": "or", "elements": tags})


def _json_schema_format(schema: Any) -> dict[str, Any]:
    """xgrammar ``JSONSchemaFormat(json_schema=schema)`` as vLLM dumps it."""
    return {"type": "json_schema", "json_schema": schema, "style": "json", "any_order": False,
            "max_whitespace_cnt": None, "excludes": []}


def output_format(so: dict[str, Any] | None) -> dict[str, Any] | None:
    """vLLM 0.33 ``structured_outputs_to_format`` for the constraints reproduced here: a JSON
    object or schema (``json_object`` / ``json``) and a structural tag's ``format``; ``None`` for
    others (regex, choice, grammar) or no constraint."""
    if not so:
        return None
    if so.get("json_object"):
        return _json_schema_format({"type": "object"})
    schema = so.get("json")
    if schema is not None:
        return _json_schema_format(json.loads(schema) if isinstance(schema, str) else schema)
    if any(so.get(k) is not None for k in ("regex", "choice", "grammar")):
        return None
    tag = so.get("structural_tag")
    if isinstance(tag, str):
        fmt = json.loads(tag)
        return fmt.get("format") if isinstance(fmt, dict) and "structures" not in fmt else None
    return None


def harmony_output_format(schema: Any, content: dict[str, Any] | None = None) -> dict[str, Any]:
    """vLLM 0.33 ``_adjust_output_format`` for a JSON ``response_format`` on gpt-oss: the JSON
    goes in the final channel, after an optional analysis message (``schema``: the JSON schema,
    ``{"type": "object"}`` for ``json_object``). ``content``: another xgrammar format instead
    (a regex or a choice, :func:`harmony_text_format`), in one final tag without a
    ``<|constrain|>``. Returns the ``structured_outputs``."""
    final: dict[str, Any]
    if content is not None:
        final = {"type": "tag", "begin": _HARMONY_FINAL.format(constrain=""), "content": content,
                 "end": list(_HARMONY_END)}
    else:
        final = {"type": "or", "elements": [
            {"type": "tag", "begin": _HARMONY_FINAL.format(constrain=constrain),
             "content": _json_schema_format(schema), "end": list(_HARMONY_END)}
            for constrain in _HARMONY_CONSTRAINS]}
    tag = {"type": "structural_tag", "format": _harmony_sequence(final, commentary=False)}
    return {**empty_structured_outputs(), "structural_tag": json.dumps(tag)}


def harmony_text_format(so: dict[str, Any]) -> dict[str, Any] | None:
    """vLLM 0.33 ``structured_outputs_to_format`` for a ``regex`` or a ``choice`` (xgrammar's
    ``RegexFormat`` / an ``OrFormat`` of ``ConstStringFormat``); ``None`` for other constraints."""
    if so.get("regex") is not None:
        return {"type": "regex", "pattern": so["regex"]}
    if isinstance(so.get("choice"), list):
        return {"type": "or", "elements": [{"type": "const_string", "value": c} for c in so["choice"]]}
    return None


def _tool_tag(
    parser: str, tools: list[dict[str, Any]], choice: Any, parallel: bool, has_output: bool,
    output: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """vLLM 0.33 ``_apply_structural_tag`` (no ``--tool-strict-level``): required / named
    always; ``auto`` when a tool is ``strict``, or when ``parallel_tool_calls`` is false (the
    single call needs the envelope in the grammar) and no output format is asked for. ``auto``
    with a strict tool and an output format (``output``, :func:`output_format`): either the
    calls as under ``required`` or the output (vLLM's ``OrFormat`` of the two)."""
    named = choice["function"]["name"] if isinstance(choice, dict) else None
    chosen = [t["function"] for t in tools if named is None or t["function"]["name"] == named]
    mode = "forced" if named is not None else choice
    if mode not in ("auto", "required", "forced"):
        return None
    if mode == "auto" and (parallel or has_output) and not any(fn.get("strict") for fn in chosen):
        return None
    if mode == "auto" and has_output and output is not None:
        calls = _tool_tag(parser, tools, "required", parallel, False)
        assert calls is not None
        return {"type": "structural_tag", "format": {"type": "or", "elements": [
            calls["format"], output]}}
    if parser in STRUCTURAL_TAG_PARSERS:
        fmt = _hermes_format(chosen, mode, parallel)
    elif parser == "openai":
        fmt = _harmony_format(chosen, mode)
    else:
        fmt = _builtin_format(parser, chosen, mode, parallel)
    return {"type": "structural_tag", "format": fmt}


def _json_array(tools: list[dict[str, Any]], choice: Any) -> dict[str, Any] | None:
    named = choice["function"]["name"] if isinstance(choice, dict) else None
    if choice != "required" and named is None:
        return None
    items = [
        {
            "properties": {
                "name": {"type": "string", "enum": [t["function"]["name"]]},
                "arguments": t["function"].get("parameters") or {"type": "object"},
            },
            "required": ["name", "arguments"],
            "type": "object",
        }
        for t in tools
        if named is None or t["function"]["name"] == named
    ]
    schema: dict[str, Any] = {"type": "array", "minItems": 1, "items": {"type": "object", "anyOf": items}}
    if named is not None:
        schema["maxItems"] = 1
    return schema


def tool_structured_outputs(
    tool_parser: str | None,
    tools: list[dict[str, Any]] | None,
    choice: Any,
    parallel_tool_calls: bool | None,
    has_output: bool = False,
    output: dict[str, Any] | None = None,
) -> tuple[bool, dict[str, Any] | None]:
    """``(handled, structured_outputs)`` for a tool parser whose vLLM ``adjust_request`` is
    reproduced here: hermes-style parsers send a ``structural_tag`` (``required``: one or more
    calls of the given tools; a named tool: exactly one; ``auto`` with a ``strict`` tool: calls
    triggered by ``<tool_call>``, strict tools' arguments held to their schema), Mistral a JSON
    array schema of ``{name, arguments}`` objects; ``llama3_json`` / ``qwen3_coder`` xgrammar's
    builtin ``llama`` / ``qwen_3_coder`` tags. ``has_output``: the request asks for an output
    format (``response_format`` other than text, or ``structured_outputs``); ``output``: that
    format as xgrammar's (:func:`output_format`), combined with ``auto`` + strict tool calls.
    ``handled`` is ``False`` for other parsers."""
    tagged = STRUCTURAL_TAG_PARSERS | BUILTIN_TAG_PARSERS
    if not tools or tool_parser is None:
        return tool_parser in tagged | JSON_ARRAY_PARSERS, None
    parallel = parallel_tool_calls is not False
    if tool_parser in tagged:
        tag = _tool_tag(tool_parser, tools, choice, parallel, has_output, output)
        if tag is None:
            return True, None
        return True, {**empty_structured_outputs(), "structural_tag": json.dumps(tag)}
    if tool_parser in JSON_ARRAY_PARSERS:
        schema = _json_array(tools, choice)
        return True, None if schema is None else {**empty_structured_outputs(), "json": schema}
    return False, None
