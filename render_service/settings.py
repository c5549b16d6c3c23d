"""Service configuration: one frozen value, built once at start-up (by the CLI or by tests).

Flag names follow ``vllm launch render`` so deployments carry over; each field's docstring
names the flag. Nothing else in the service reads command-line flags or the environment.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

EMBEDDED_MODEL_DIR = Path(__file__).parent / "data" / "Qwen3-0.6B"
"""Tokenizer, chat template and configs of Qwen/Qwen3-0.6B shipped inside the package."""
EMBEDDED_MODEL_NAME = "Qwen/Qwen3-0.6B"


@dataclass(frozen=True, slots=True)
class Settings:
    """Everything the service is configured with.

    Attributes:
        model: local folder in Hugging Face layout, or a hub id (offline cache); ``None`` serves
            the embedded Qwen3-0.6B (positional ``MODEL`` / ``--model``).
        served_model_name: names accepted in ``model`` fields; the first is echoed
            (``--served-model-name``). Defaults to the model path/id.
        host, port: bind address (``--host``, ``--port``).
        reasoning_parser: ``--reasoning-parser`` name, or ``None``.
        tool_call_parser: ``--tool-call-parser`` name, or ``None``.
        enable_auto_tool_choice: ``--enable-auto-tool-choice``.
        chat_template: path or inline Jinja text overriding the model's (``--chat-template``).
        default_chat_template_kwargs: merged under each request's ``chat_template_kwargs``
            (``--default-chat-template-kwargs``; the request wins).
        max_model_len: context length; default from config.json / tokenizer
            (``--max-model-len``).
        max_logprobs: bound on ``top_logprobs`` (``--max-logprobs``, upstream default 20).
        keep_stop_strings: keep ``stop`` strings in rendered ``sampling_params`` (for engines
            that detokenize); by default they are left out and enforced by derender.
        generation_config: ``"auto"`` applies generation_config.json defaults, ``"vllm"``
            ignores them (``--generation-config``).
        renderer_num_workers: worker processes/threads for CPU work
            (``--renderer-num-workers``).
        trust_request_chat_template: accept a request's own ``chat_template``
            (``--trust-request-chat-template``); refused with 400 otherwise.
        exclude_tools_when_tool_choice_none: hide ``tools`` from the template when
            ``tool_choice`` is ``"none"`` (``--exclude-tools-when-tool-choice-none``).
        chat_template_content_format: ``auto`` (detect from the template), ``string`` or
            ``openai`` (``--chat-template-content-format``).
        template_max_seconds: wall-clock budget for rendering one chat template
            (``--template-max-seconds``); over budget → 400.
        template_max_chars: size budget of one rendered prompt in characters
            (``--template-max-chars``); over budget → 400.
        stream_state_keys: HMAC-SHA256 keys for streaming-derender ``stream_state``; states are
            signed with the first and accepted under any (rotation); empty = unsigned states.
    """

    model: str | None = None
    served_model_name: tuple[str, ...] = ()
    host: str = "127.0.0.1"
    port: int = 8000
    reasoning_parser: str | None = None
    tool_call_parser: str | None = None
    enable_auto_tool_choice: bool = False
    chat_template: str | None = None
    default_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    max_model_len: int | None = None
    max_logprobs: int = 20
    keep_stop_strings: bool = False
    generation_config: str = "auto"
    renderer_num_workers: int = 1
    trust_request_chat_template: bool = False
    exclude_tools_when_tool_choice_none: bool = False
    chat_template_content_format: str = "auto"
    template_max_seconds: float = 5.0
    template_max_chars: int = 8_000_000
    stream_state_keys: tuple[str, ...] = ()

    @property
    def model_path(self) -> str:
        """The folder or hub id to load; the embedded model when none was given."""
        return self.model if self.model else str(EMBEDDED_MODEL_DIR)

    @property
    def model_names(self) -> tuple[str, ...]:
        """Accepted model names, first one echoed in responses."""
        if self.served_model_name:
            return self.served_model_name
        return (self.model if self.model else EMBEDDED_MODEL_NAME,)
