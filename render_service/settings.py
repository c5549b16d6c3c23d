"""Service configuration: one frozen value, built once at start-up (by the CLI or by tests).

Flag names follow ``vllm launch render`` so deployments carry over; each field's docstring
names the flag. Only ``cli.py`` reads command-line flags and ``RENDER_SERVICE_*`` environment
variables (``server.py`` hands the finished value to worker processes).
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
        trust_request_chat_template: accept a request's own ``chat_template``
            (``--trust-request-chat-template``); refused with 400 otherwise.
        exclude_tools_when_tool_choice_none: hide ``tools`` from the template when
            ``tool_choice`` is ``"none"`` (``--exclude-tools-when-tool-choice-none``).
        anthropic_disabled_thinking_effort: ``reasoning_effort`` an Anthropic request with
            ``thinking: {type: "disabled"}`` renders with (``--anthropic-disabled-thinking-effort``,
            vLLM 0.33): ``auto`` probes the template (``none`` unless it is ignored, then ``low``).
        chat_template_content_format: ``auto`` (detect from the template), ``string`` or
            ``openai`` (``--chat-template-content-format``).
        template_max_seconds: wall-clock budget for rendering one chat template
            (``--template-max-seconds``); over budget → 400.
        template_max_chars: size budget of one rendered prompt in characters
            (``--template-max-chars``); over budget → 400.
        renderer_num_workers: worker processes serving the app (``--renderer-num-workers``);
            each runs its own event loop and thread pool, so throughput scales with cores.
        renderer_threads: threads per worker process running render/derender work
            (``--renderer-threads``).
        max_queued_requests: requests allowed to wait for a thread per process; more → 503
            (``--max-queued-requests``).
        queue_timeout: seconds a request may wait for a thread before a 503 (``--queue-timeout``).
        max_request_body_bytes: request body limit in bytes, Content-Length and streamed → 413
            (``--max-request-body-bytes``).
        max_messages, max_tools, max_n: bounds on ``messages``, ``tools`` and ``n`` → 400
            (``--max-messages``, ``--max-tools``, ``--max-n``).
        max_stream_state_bytes: bound on the serialized ``stream_state`` → 400
            (``--max-stream-state-bytes``).
        api_keys: accepted ``Authorization: Bearer`` keys on ``/v1*`` and ``/inference*``;
            empty = no auth (``--api-key``, env ``RENDER_SERVICE_API_KEY`` / ``VLLM_API_KEY``).
        stream_state_keys: HMAC keys for ``stream_state``; the first signs, any verifies
            (rotation). Empty and not ``allow_unsigned_stream_state`` → states are signed with a key
            derived from the configuration fingerprint (the same on identically configured
            replicas; not secret), with a warning (``--stream-state-key``, ``--stream-state-key-file``).
        stream_interval: default ``sampling_params.stream_interval`` for requests without one
            (``--stream-interval``; vLLM ``SamplingParams.stream_interval``: the engine sends a
            streamed output every N tokens; None = leave it to the engine's ``--stream-interval``).
        prefix_cache_bytes: memory cap of the multi-turn prefix cache of prompt token ids
            (``--prefix-cache-bytes``; 0 disables it).
        allow_unsigned_stream_state: accept and emit unsigned states
            (``--allow-unsigned-stream-state``); never the default.
        shutdown_delay: seconds ``/ready`` answers 503 after SIGTERM before the server stops
            accepting (``--shutdown-delay``), so load balancers drain the replica first.
        log_format: ``"json"`` (one object per line) or ``"text"`` (``--log-format``).
        timeout_keep_alive: seconds an idle keep-alive connection is held open
            (``--timeout-keep-alive``); keep it above the load balancer's idle timeout.
        engine_urls: tokens-only decode engines (``--engine-url``, repeatable); set, the server
            is also a gateway serving ``/v1/chat/completions`` and ``/v1/completions``.
        prefill_urls: prefill engines (``--prefill-url``); set, each request is prefilled there
            first (vLLM P/D handshake via ``kv_transfer_params``).
        engine_timeout: seconds an engine may stay silent (answer, or the gap between stream
            events) before a 504 (``--engine-timeout``).
        engine_connect_timeout: seconds to connect to an engine (``--engine-connect-timeout``).
        engine_max_connections: kept-alive connections of the engine client (``--engine-max-connections``).
        engine_api_key: sent to every engine as ``Authorization: Bearer <key>`` (generate and
            abort calls), for engines started with vLLM's ``--api-key`` (``--engine-api-key``, env
            ``RENDER_SERVICE_ENGINE_API_KEY``); distinct from ``api_keys``, which guard this server.

    Multimodal (vision-language models; README "Multimodal render"):
        limit_mm_per_prompt: items per modality per prompt (``--limit-mm-per-prompt``; unnamed
            supported modalities 999, unsupported 0).
        mm_processor_kwargs: processor kwargs under each request's (``--mm-processor-kwargs``).
        trust_request_mm_kwargs: accept request ``mm_processor_kwargs`` / ``media_io_kwargs``
            (``--trust-request-mm-kwargs``).
        allowed_local_media_path: folder ``file://`` URLs may read (``--allowed-local-media-path``).
        allowed_media_domains: http(s) hosts media may come from; empty = any public host
            (``--allowed-media-domains``).
        media_io_kwargs: per-modality media loading kwargs (``--media-io-kwargs``).
        mm_hasher_algorithm: ``blake3``, ``sha256`` or ``sha512`` (``--mm-hasher-algorithm``).
        max_image_pixels: pixel budget of one image or video frame, checked from the header
            before decoding (``--max-image-pixels``).
        media_max_bytes: byte cap of one fetched/loaded media item (``--media-max-bytes``).
        media_fetch_timeout: seconds for an http(s) media fetch (``--media-fetch-timeout``).
        media_max_redirects: redirects followed, each re-checked (``--media-max-redirects``).
        allow_private_media_urls: let media URLs reach loopback/link-local/private addresses
            (``--allow-private-media-urls``).
        mm_cache_bytes: memory cap of the processed-media cache (``--mm-cache-bytes``; 0 off).
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
    anthropic_disabled_thinking_effort: str = "auto"
    chat_template_content_format: str = "auto"
    template_max_seconds: float = 5.0
    template_max_chars: int = 8_000_000
    renderer_threads: int = 4
    max_queued_requests: int = 256
    queue_timeout: float = 30.0
    max_request_body_bytes: int = 32 * 1024 * 1024
    max_messages: int = 4096
    max_tools: int = 1024
    max_n: int = 128
    max_stream_state_bytes: int = 1024 * 1024
    api_keys: tuple[str, ...] = ()
    stream_state_keys: tuple[str, ...] = ()
    prefix_cache_bytes: int = 64 * 1024 * 1024
    stream_interval: int | None = None
    allow_unsigned_stream_state: bool = False
    shutdown_delay: float = 0.0
    log_format: str = "json"
    timeout_keep_alive: int = 5
    # --- vLLM-compatibility settings (fidelity) ---
    #: ``--reasoning-effort-map`` (JSON): a request's ``reasoning_effort`` → the one the
    #: template / harmony knows, as vLLM's ``map_reasoning_effort``.
    reasoning_effort_map: dict[str, str] = field(default_factory=dict)
    #: harmony (gpt-oss) ``Current date:``; ``None`` = today (vLLM ``VLLM_SYSTEM_START_DATE``).
    system_start_date: str | None = None
    #: ``--tokenizer``: load the tokenizer from this folder / hub id instead of the model's.
    tokenizer: str | None = None
    #: ``--revision`` / ``--tokenizer-revision`` for hub ids.
    revision: str | None = None
    tokenizer_revision: str | None = None
    #: ``--cohere-format``: echoed as ``cohere_format`` in the template kwargs (vLLM default cmd4).
    cohere_format: str | None = "cmd4"

    # gateway (serving/gateway/)
    engine_urls: tuple[str, ...] = ()
    prefill_urls: tuple[str, ...] = ()
    engine_timeout: float = 600.0
    engine_connect_timeout: float = 5.0
    engine_max_connections: int = 1024
    engine_api_key: str | None = None
    limit_mm_per_prompt: dict[str, int] = field(default_factory=dict)
    mm_processor_kwargs: dict[str, Any] = field(default_factory=dict)
    trust_request_mm_kwargs: bool = False
    allowed_local_media_path: str | None = None
    allowed_media_domains: tuple[str, ...] = ()
    media_io_kwargs: dict[str, dict[str, Any]] = field(default_factory=dict)
    mm_hasher_algorithm: str = "blake3"
    max_image_pixels: int = 50_000_000
    media_max_bytes: int = 32 * 1024 * 1024
    media_fetch_timeout: float = 10.0
    media_max_redirects: int = 3
    allow_private_media_urls: bool = False
    mm_cache_bytes: int = 512 * 1024 * 1024

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
