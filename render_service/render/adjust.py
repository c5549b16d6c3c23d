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

from typing import Any

from ..protocol.chat import ChatCompletionRequest
from ..settings import Settings

#: vLLM reasoning parsers (engine adapters) whose ``adjust_request`` always keeps special tokens.
REASONING_KEEPS_SPECIAL = frozenset({
    "deepseek_v4", "gemma4", "glm45", "glm47", "kimi_k2", "kimi_k3", "minimax_m2",
    "minimax_m2_append_think", "mistral", "nemotron_v3", "qwen3", "seed_oss", "step3p5",
})
#: vLLM tool parsers that keep special tokens when tools are given and ``tool_choice`` is not none.
TOOLS_KEEP_SPECIAL = frozenset({
    "deepseek_v32", "deepseek_v4", "gemma4", "gigachat3", "glm45", "glm47", "granite4", "hermes",
    "internlm", "jamba", "kimi_k2", "lfm2", "minimax_m2", "mistral", "qwen3_coder", "qwen3_json",
    "qwen3_xml", "seed_oss", "step3", "step3p5",
})

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
