"""Command line: ``render-service serve [MODEL] [flags]`` (flag names as ``vllm launch render``).

Every ``serve`` flag can also be set by an environment variable ``RENDER_SERVICE_<FLAG>`` (flag
name upper-cased, dashes as underscores, e.g. ``RENDER_SERVICE_MAX_N=64``; booleans ``1``/``true``;
lists comma-separated); the command line wins. Aliases: ``RENDER_SERVICE_MODEL``, API keys also from
``VLLM_API_KEY``, stream-state keys from ``RENDER_SERVICE_STREAM_STATE_KEYS``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

from ..settings import Settings


def json_object(raw: str) -> dict[str, object]:
    """A JSON-object flag value (``--default-chat-template-kwargs``, ``--limit-mm-per-prompt``...):
    anything else is refused at start-up instead of failing every request later."""
    try:
        value = json.loads(raw)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"not JSON: {err}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {raw!r}")
    return value


def media_io_kwargs(raw: str) -> dict[str, object]:
    """``--media-io-kwargs``: a JSON object of per-modality objects, whose values the decoders can
    use (:func:`~render_service.render.multimodal.prompt.check_media_io_kwargs`), checked at
    start-up instead of failing every request with media."""
    value = json_object(raw)
    if not all(isinstance(v, dict) for v in value.values()):
        raise argparse.ArgumentTypeError(f"expected a JSON object of per-modality objects, got {raw!r}")
    from ..errors import InvalidRequest
    from ..render.multimodal.prompt import check_media_io_kwargs

    try:
        check_media_io_kwargs(value)
    except InvalidRequest as err:
        raise argparse.ArgumentTypeError(err.message) from None
    return value


def mm_processor_kwargs(raw: str) -> dict[str, object]:
    """``--mm-processor-kwargs``: a JSON object whose pixel bounds are positive integers
    (:func:`~render_service.render.multimodal.prompt.check_pixel_kwargs`), checked at start-up
    instead of failing every request with media."""
    value = json_object(raw)
    from ..errors import InvalidRequest
    from ..render.multimodal.prompt import check_pixel_kwargs

    try:
        check_pixel_kwargs(value)
    except InvalidRequest as err:
        raise argparse.ArgumentTypeError(err.message) from None
    return value


#: Options ``--limit-mm-per-prompt`` takes per modality besides ``count`` (vLLM 0.33's
#: ``ImageDummyOptions`` / ``VideoDummyOptions`` / ``AudioDummyOptions``, ``extra="forbid"``): sizes
#: for its engine's memory profiling, which a render tier does not do, so they are checked and unused.
_MM_LIMIT_OPTIONS = {"image": ("width", "height"), "video": ("num_frames", "width", "height"), "audio": ("length",)}


def mm_limits(raw: str) -> dict[str, int]:
    """``--limit-mm-per-prompt`` as vLLM 0.33 reads it (``MultiModalConfig.limit_per_prompt``): per
    modality a count (``{"image": 3}``) or an options object (``{"image": {"count": 3, "width": 512,
    "height": 512}}``, ``count`` 999 when absent); returns the counts. A negative count, a
    non-integer, or an option the modality does not have (its sizes must be positive integers) is
    refused at start-up, where vLLM's config validation refuses it, instead of failing requests."""
    value = json_object(raw)
    counts: dict[str, int] = {}

    def integer(v: object, what: str, least: int) -> int:
        if not isinstance(v, int) or isinstance(v, bool) or v < least:
            raise argparse.ArgumentTypeError(f"{what} must be an integer >= {least}, got {v!r}")
        return v

    for modality, spec in value.items():
        if isinstance(spec, dict):
            allowed = _MM_LIMIT_OPTIONS.get(modality)
            for key, option in spec.items():
                if key == "count":
                    continue
                if allowed is not None and key not in allowed:
                    raise argparse.ArgumentTypeError(
                        f"{modality}: unknown option {key!r} (allowed: count, {', '.join(allowed)})")
                if allowed is not None:
                    integer(option, f"{modality}.{key}", 1)
            counts[modality] = integer(spec.get("count", 999), f"{modality}.count", 0)
        else:
            counts[modality] = integer(spec, modality, 0)
    return counts


def media_dir(raw: str) -> str:
    """``--allowed-local-media-path``: an existing folder, checked at start-up with vLLM 0.33's
    messages (its ``MediaConnector`` checks when it is built; a wrong path here would otherwise
    fail every ``file://`` request as the client's fault)."""
    path = Path(raw).resolve()
    if not path.exists():
        raise argparse.ArgumentTypeError(f"Invalid `--allowed-local-media-path`: The path {path} does not exist.")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"Invalid `--allowed-local-media-path`: The path {path} must be a directory.")
    return raw


_DECIMAL = {"k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}
_BINARY = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def max_model_len(raw: str) -> int | None:
    """``--max-model-len`` as vLLM 0.33 reads it: an integer or a human-readable one (``32k`` =
    32,000, ``32K`` = 32,768, ``25.6k``; decimals only with the decimal suffixes), and ``-1`` /
    ``auto`` for the length derived from the model (``None`` here). Zero and other negatives are
    refused at start-up, as vLLM's ``ModelConfig`` refuses them ("must be a positive integer")."""
    value = raw.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([kKmMgGtT])", value)
    try:
        if value.lower() == "auto":
            return None
        if match and match.group(2) in _DECIMAL:
            number = int(float(match.group(1)) * _DECIMAL[match.group(2)])
        elif match:
            number = int(match.group(1)) * _BINARY[match.group(2)]
        else:
            number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected an integer such as 32768, 32k, 32K or auto, got {raw!r}") from None
    if number == -1:
        return None
    if number < 1:
        raise argparse.ArgumentTypeError(
            f"max_model_len must be a positive integer (or -1 / auto), got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="render-service", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve render/derender over HTTP")
    serve.add_argument("model", nargs="?", default=None,
                       help="model folder (Hugging Face layout) or hub id; default: embedded Qwen3-0.6B")
    serve.add_argument("--model", dest="model_flag", default=None, help="same as the positional MODEL")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--served-model-name", nargs="+", default=None)
    serve.add_argument("--reasoning-parser", default=None)
    serve.add_argument("--tool-call-parser", default=None)
    serve.add_argument("--enable-auto-tool-choice", action="store_true")
    serve.add_argument("--chat-template", default=None, help="file path or inline Jinja")
    serve.add_argument("--default-chat-template-kwargs", type=json_object, default=None,
                       help='JSON object, e.g. \'{"enable_thinking": false}\'')
    serve.add_argument("--max-model-len", type=max_model_len, default=None,
                       help="context length (32768, 32k, 32K; -1 or auto: from the model's config)")
    serve.add_argument("--max-logprobs", type=int, default=20)
    serve.add_argument("--generation-config", default="auto", help="'auto' (model defaults) or 'vllm'")
    serve.add_argument("--keep-stop-strings", action="store_true",
                       help="keep `stop` in rendered sampling_params (engines that detokenize)")
    serve.add_argument("--renderer-num-workers", type=int, default=1,
                       help="worker processes sharing the port (set to the number of cores)")
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--trust-request-chat-template", action="store_true",
                       help="accept a request's own chat_template")
    serve.add_argument("--exclude-tools-when-tool-choice-none", action="store_true")
    serve.add_argument("--anthropic-disabled-thinking-effort", default="auto",
                       choices=("auto", "none", "low", "medium", "high", "xhigh", "max"),
                       help="reasoning_effort for Anthropic thinking.type=disabled (auto: probe)")
    serve.add_argument("--chat-template-content-format", default="auto", choices=("auto", "string", "openai"))
    serve.add_argument("--template-max-seconds", type=float, default=5.0,
                       help="time budget for rendering one chat template (over budget: 400)")
    serve.add_argument("--template-max-chars", type=int, default=8_000_000,
                       help="size budget of one rendered prompt in characters (over budget: 400)")
    serve.add_argument("--prefix-cache-bytes", type=int, default=64 * 1024 * 1024,
                       help="memory cap of the multi-turn prompt prefix cache (0 disables it)")
    serve.add_argument("--stream-interval", type=int, default=None,
                       help="default sampling_params.stream_interval (engine sends a chunk every N "
                       "tokens) for requests that do not set stream_interval")
    add_ops_flags(serve)
    add_gateway_flags(serve)
    add_multimodal_flags(serve)
    add_vllm_compat_flags(serve)
    apply_env_defaults(serve)
    health = sub.add_parser("health", help="probe the local server's /health (container HEALTHCHECK)")
    health.add_argument("--url", default=None,
                        help="URL to probe; default: the address of the running `serve` (PID 1's "
                             "flags, then RENDER_SERVICE_HOST/PORT)")
    health.add_argument("--host", default=None,
                        help="probe this host instead of the discovered one (with the discovered port)")
    health.add_argument("--port", type=int, default=None,
                        help="probe this port instead of the discovered one (with the discovered host)")
    health.add_argument("--timeout", type=float, default=2.0)
    return parser


# --- vLLM `launch render` compatibility flags (fidelity) -------------------------------------
#: Every option of ``vllm launch render`` 0.33 with how it takes values (written by
#: ``tools/list_vllm_render_flags.py``); those not defined above are accepted and ignored.
VLLM_FLAGS_FILE = Path(__file__).with_name("vllm_render_flags.json")
#: vLLM options that mean something here (their values are used), beyond the ones defined above.
VLLM_USED = ("--tokenizer", "--revision", "--tokenizer-revision", "--reasoning-effort-map", "--cohere-format")


_IGNORED_DEST: dict[str, str] = {}


def add_vllm_compat_flags(serve: argparse.ArgumentParser) -> None:
    """``--tokenizer``, ``--revision``, ``--tokenizer-revision``, ``--reasoning-effort-map``,
    ``--cohere-format``, ``--system-start-date`` (used), and every other ``vllm launch render``
    option not defined here, accepted as a no-op (``dest`` ``vllm_ignored__<name>``; logged once
    at start-up)."""
    serve.add_argument("--tokenizer", default=None, help="tokenizer folder or hub id (default: the model's)")
    serve.add_argument("--revision", default=None, help="model revision for a hub id")
    serve.add_argument("--tokenizer-revision", default=None, help="tokenizer revision for a hub id")
    serve.add_argument("--reasoning-effort-map", type=json_object, default=None,
                       help="JSON object mapping request reasoning_effort values to the model's")
    serve.add_argument("--cohere-format", default="cmd4", help="echoed as the cohere_format template kwarg")
    serve.add_argument("--system-start-date", default=None,
                       help="harmony (gpt-oss) 'Current date:' (YYYY-MM-DD; default today); not a vLLM "
                       "flag: vLLM reads VLLM_SYSTEM_START_DATE, which sets this too")
    known = set(serve._option_string_actions)
    flags: dict[str, str] = json.loads(VLLM_FLAGS_FILE.read_text(encoding="utf-8"))
    for name, kind in flags.items():
        if name in known:
            continue
        dest = "vllm_ignored__" + name.lstrip("-").replace("-", "_")
        _IGNORED_DEST[dest] = name
        if kind == "flag":
            serve.add_argument(name, dest=dest, action="store_const", const=True, default=None,
                               help=argparse.SUPPRESS)
        else:
            serve.add_argument(name, dest=dest, nargs="+" if kind == "list" else None, default=None,
                               help=argparse.SUPPRESS)
        known.add(name)


def ignored_vllm_flags(args: argparse.Namespace) -> list[str]:
    """The vLLM-only options given on this command line (no effect here), for the start-up log."""
    return sorted(
        _IGNORED_DEST.get(dest, dest)
        for dest, value in vars(args).items()
        if dest.startswith("vllm_ignored__") and value is not None
    )


#: ``config.json`` ``model_type`` → the reasoning parser vLLM uses when ``--reasoning-parser`` is
#: not given (``GptOssForCausalLMConfig.verify_and_update_config``).
DEFAULT_REASONING_PARSER = {"gpt_oss": "openai_gptoss"}


def default_reasoning_parser(model: str | None) -> str | None:
    """The model's default reasoning parser (see :data:`DEFAULT_REASONING_PARSER`), or ``None``."""
    config = Path(model or "") / "config.json"
    if not model or not config.is_file():
        return None
    try:
        model_type = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None
    return DEFAULT_REASONING_PARSER.get(model_type)


def vllm_compat_settings(args: argparse.Namespace) -> dict[str, object]:
    """The :class:`Settings` fields the vLLM-compatibility flags set (``--system-start-date``, or
    ``VLLM_SYSTEM_START_DATE`` as in vLLM, pins harmony's ``Current date:``)."""
    return {
        "tokenizer": args.tokenizer,
        "revision": args.revision,
        "tokenizer_revision": args.tokenizer_revision,
        "reasoning_effort_map": args.reasoning_effort_map or {},
        "cohere_format": args.cohere_format or None,
        "system_start_date": args.system_start_date or None,
    }
# --- end of vLLM compatibility flags ----------------------------------------------------------


def add_ops_flags(serve: argparse.ArgumentParser) -> None:
    """Limits, security, lifecycle and logging flags (see the README, Operations)."""
    d = Settings()
    serve.add_argument("--renderer-threads", type=int, default=d.renderer_threads,
                       help="threads per worker process for render/derender work")
    serve.add_argument("--max-queued-requests", type=int, default=d.max_queued_requests,
                       help="requests allowed to wait for a thread per process; more get 503")
    serve.add_argument("--queue-timeout", type=float, default=d.queue_timeout,
                       help="seconds a request may wait for a thread before a 503")
    serve.add_argument("--max-request-body-bytes", type=int, default=d.max_request_body_bytes,
                       help="larger bodies get 413")
    serve.add_argument("--max-messages", type=int, default=d.max_messages)
    serve.add_argument("--max-tools", type=int, default=d.max_tools)
    serve.add_argument("--max-n", type=int, default=d.max_n)
    serve.add_argument("--max-stream-state-bytes", type=int, default=d.max_stream_state_bytes)
    serve.add_argument("--api-key", action="append", default=None,
                       help="require `Authorization: Bearer KEY` on /v1* and /inference* (repeatable)")
    serve.add_argument("--stream-state-key", action="append", default=None,
                       help="HMAC key for stream_state; repeat to rotate (first signs, all verify)")
    serve.add_argument("--stream-state-key-file", default=None,
                       help="file with one stream_state key per line (e.g. a mounted Secret)")
    serve.add_argument("--allow-unsigned-stream-state", action="store_true",
                       help="emit and accept unsigned stream_state (trusted networks only)")
    serve.add_argument("--shutdown-delay", type=float, default=d.shutdown_delay,
                       help="seconds /ready answers 503 after SIGTERM before the listener closes")
    serve.add_argument("--log-format", choices=("json", "text"), default=d.log_format)
    serve.add_argument("--timeout-keep-alive", type=int, default=d.timeout_keep_alive,
                       help="idle keep-alive seconds; set above the load balancer's idle timeout")


def add_gateway_flags(serve: argparse.ArgumentParser) -> None:
    """Gateway mode (see the README, Gateway): engines behind ``/v1/chat/completions``."""
    d = Settings()
    serve.add_argument("--engine-url", action="append", default=None,
                       help="tokens-only (decode) engine base URL; repeat to balance; enables the gateway")
    serve.add_argument("--prefill-url", action="append", default=None,
                       help="prefill engine base URL (repeatable): P/D disaggregation")
    serve.add_argument("--engine-timeout", type=float, default=d.engine_timeout,
                       help="seconds an engine may stay silent before a 504")
    serve.add_argument("--engine-connect-timeout", type=float, default=d.engine_connect_timeout)
    serve.add_argument("--engine-max-connections", type=int, default=d.engine_max_connections,
                       help="kept-alive connections in the engine client pool")
    serve.add_argument("--engine-api-key", default=None,
                       help="bearer key the engines require (their --api-key); not this server's --api-key")


def add_multimodal_flags(serve: argparse.ArgumentParser) -> None:
    """Vision-language flags (names as ``vllm launch render``, plus this tier's safety limits)."""
    d = Settings()
    serve.add_argument("--limit-mm-per-prompt", type=mm_limits, default=None,
                       help='JSON, e.g. \'{"image": 3, "video": 1}\' or \'{"image": {"count": 3}}\'')
    serve.add_argument("--mm-processor-kwargs", type=mm_processor_kwargs, default=None, help="JSON object")
    serve.add_argument("--trust-request-mm-kwargs", action="store_true")
    serve.add_argument("--allowed-local-media-path", type=media_dir, default=None)
    serve.add_argument("--allowed-media-domains", nargs="+", default=None)
    serve.add_argument("--media-io-kwargs", type=media_io_kwargs, default=None,
                       help='JSON, e.g. \'{"video": {"fps": 2}}\'')
    serve.add_argument("--mm-hasher-algorithm", choices=("blake3", "sha256", "sha512"), default="blake3")
    serve.add_argument("--max-image-pixels", type=int, default=d.max_image_pixels)
    serve.add_argument("--media-max-bytes", type=int, default=d.media_max_bytes)
    serve.add_argument("--media-fetch-timeout", type=float, default=d.media_fetch_timeout)
    serve.add_argument("--media-max-redirects", type=int, default=d.media_max_redirects)
    serve.add_argument("--allow-private-media-urls", action="store_true")
    serve.add_argument("--mm-cache-bytes", type=int, default=d.mm_cache_bytes)


def multimodal_settings(args: argparse.Namespace) -> dict[str, object]:
    """The multimodal :class:`Settings` fields from parsed flags."""
    return {
        "limit_mm_per_prompt": args.limit_mm_per_prompt or {},
        "mm_processor_kwargs": args.mm_processor_kwargs or {},
        "trust_request_mm_kwargs": args.trust_request_mm_kwargs,
        "allowed_local_media_path": args.allowed_local_media_path,
        "allowed_media_domains": tuple(args.allowed_media_domains or ()),
        "media_io_kwargs": args.media_io_kwargs or {},
        "mm_hasher_algorithm": args.mm_hasher_algorithm,
        "max_image_pixels": args.max_image_pixels,
        "media_max_bytes": args.media_max_bytes,
        "media_fetch_timeout": args.media_fetch_timeout,
        "media_max_redirects": args.media_max_redirects,
        "allow_private_media_urls": args.allow_private_media_urls,
        "mm_cache_bytes": args.mm_cache_bytes,
    }


#: dest -> extra environment variable names read (after ``RENDER_SERVICE_<DEST>``).
ENV_ALIASES = {
    "model_flag": ("RENDER_SERVICE_MODEL",),
    "api_key": ("VLLM_API_KEY",),
    "stream_state_key": ("RENDER_SERVICE_STREAM_STATE_KEYS",),
    "system_start_date": ("VLLM_SYSTEM_START_DATE",),
}
_TRUE = ("1", "true", "yes", "on")


def apply_env_defaults(parser: argparse.ArgumentParser) -> None:
    """Take each flag's default from its environment variable when set (the command line wins)."""
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        names = ("RENDER_SERVICE_" + action.dest.upper(), *ENV_ALIASES.get(action.dest, ()))
        raw = next((os.environ[n] for n in names if os.environ.get(n)), None)
        if raw is None:
            continue
        parser.set_defaults(**{action.dest: _env_value(action, raw)})


def _env_value(action: argparse.Action, raw: str) -> object:
    if isinstance(action, argparse._StoreTrueAction):
        return raw.strip().lower() in _TRUE
    if action.nargs in ("+", "*") or isinstance(action, argparse._AppendAction):
        return [part.strip() for part in raw.split(",") if part.strip()]
    return action.type(raw) if callable(action.type) else raw


def read_key_file(path: str) -> list[str]:
    """Keys from a file, one per line; blank lines and ``#`` comments ignored."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]


MIN_KEY_CHARS = 16


def stream_state_keys(args: argparse.Namespace) -> tuple[str, ...]:
    """``--stream-state-key`` values then the key file's, de-duplicated in order.

    Raises:
        SystemExit: a key shorter than 16 characters.
    """
    keys = list(args.stream_state_key or ())
    if args.stream_state_key_file:
        keys += read_key_file(args.stream_state_key_file)
    short = [k for k in keys if len(k) < MIN_KEY_CHARS]
    if short:
        raise SystemExit(f"--stream-state-key: keys must have at least {MIN_KEY_CHARS} characters")
    return tuple(dict.fromkeys(keys))


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Map parsed flags to :class:`Settings`."""
    if args.reasoning_parser is None:  # not given: the model's default, as vLLM (gpt-oss)
        args.reasoning_parser = default_reasoning_parser(args.model_flag or args.model)
    if args.reasoning_parser == "none":
        args.reasoning_parser = None
    resolve_auto_parsers(args)
    return Settings(
        model=args.model_flag or args.model,
        served_model_name=tuple(args.served_model_name or ()),
        host=args.host,
        port=args.port,
        reasoning_parser=args.reasoning_parser,
        tool_call_parser=args.tool_call_parser,
        enable_auto_tool_choice=args.enable_auto_tool_choice,
        chat_template=args.chat_template,
        default_chat_template_kwargs=args.default_chat_template_kwargs or {},
        max_model_len=args.max_model_len,
        max_logprobs=args.max_logprobs,
        keep_stop_strings=args.keep_stop_strings,
        generation_config=args.generation_config,
        renderer_num_workers=args.renderer_num_workers,
        trust_request_chat_template=args.trust_request_chat_template,
        exclude_tools_when_tool_choice_none=args.exclude_tools_when_tool_choice_none,
        anthropic_disabled_thinking_effort=args.anthropic_disabled_thinking_effort,
        chat_template_content_format=args.chat_template_content_format,
        template_max_seconds=args.template_max_seconds,
        template_max_chars=args.template_max_chars,
        prefix_cache_bytes=args.prefix_cache_bytes,
        stream_interval=args.stream_interval,
        renderer_threads=args.renderer_threads,
        max_queued_requests=args.max_queued_requests,
        queue_timeout=args.queue_timeout,
        max_request_body_bytes=args.max_request_body_bytes,
        max_messages=args.max_messages,
        max_tools=args.max_tools,
        max_n=args.max_n,
        max_stream_state_bytes=args.max_stream_state_bytes,
        api_keys=tuple(dict.fromkeys(args.api_key or ())),
        stream_state_keys=stream_state_keys(args),
        allow_unsigned_stream_state=args.allow_unsigned_stream_state,
        shutdown_delay=args.shutdown_delay,
        log_format=args.log_format,
        timeout_keep_alive=args.timeout_keep_alive,
        engine_urls=tuple(u.rstrip("/") for u in args.engine_url or ()),
        prefill_urls=tuple(u.rstrip("/") for u in args.prefill_url or ()),
        engine_timeout=args.engine_timeout,
        engine_connect_timeout=args.engine_connect_timeout,
        engine_max_connections=args.engine_max_connections,
        engine_api_key=args.engine_api_key,
        **multimodal_settings(args),  # type: ignore[arg-type]
        **vllm_compat_settings(args),  # type: ignore[arg-type]
    )


def resolve_auto_parsers(args: argparse.Namespace) -> None:
    """Replace ``auto`` parser flags by the names ``parsers.auto.choose`` picks from the model
    folder, and log the choice. The embedded default model with neither parser flag given is
    served as if both were ``auto`` (it then parses Qwen3 reasoning and hermes tool calls);
    ``none`` turns a parser off. A tool parser chosen by ``auto`` turns on auto tool choice
    (``--enable-auto-tool-choice``), as a deployment asking for automatic parsing expects."""
    import logging

    from parsers.auto import AUTO, choose

    model = args.model_flag or args.model
    if model is None and args.reasoning_parser is None and args.tool_call_parser is None:
        args.reasoning_parser = args.tool_call_parser = AUTO
    if AUTO not in (args.reasoning_parser, args.tool_call_parser):
        if args.tool_call_parser == "none":
            args.tool_call_parser = None
        return
    from ..models import read_model_facts

    probe = Settings(model=model)
    facts = read_model_facts(probe.model_path, args.chat_template)
    choice = choose(facts, reasoning=args.reasoning_parser == AUTO, tools=args.tool_call_parser == AUTO)
    if args.reasoning_parser == AUTO:
        args.reasoning_parser = choice.reasoning_parser
    if args.tool_call_parser == AUTO:
        args.tool_call_parser = choice.tool_call_parser
        args.enable_auto_tool_choice = args.enable_auto_tool_choice or choice.tool_call_parser is not None
    if args.tool_call_parser == "none":
        args.tool_call_parser = None
    logging.getLogger("render_service.parsers").info("%s (%s)", choice.reason, probe.model_path)


def check_parser_names(reasoning_parser: str | None, tool_call_parser: str | None) -> None:
    """Refuse to start with a parser name the library does not know (vLLM fails start-up too).

    Raises:
        SystemExit: with the unknown name and the accepted names.
    """
    import parsers

    for flag, name, known in (
        ("--reasoning-parser", reasoning_parser, parsers.REASONING_PARSERS),
        ("--tool-call-parser", tool_call_parser, parsers.TOOL_PARSERS),
    ):
        if name and name not in ("none", "auto") and name not in known:
            raise SystemExit(f"{flag} {name!r} is not a known parser; choose one of: {', '.join(known)}")


def check_response_template(model: str | None, names: Sequence[str | None]) -> None:
    """``hf``/``beam`` parse by the model's own ``response_template`` (tokenizer_config.json):
    refuse to start when the model folder has none, or one the parsers cannot use.

    Raises:
        SystemExit: with the reason.
    """
    import parsers

    wanted = [n for n in names if n in parsers.TEMPLATE_PARSERS]
    if not wanted:
        return
    path = Path(model or ".") / "tokenizer_config.json"  # the embedded default model has none
    try:
        config = json.loads(path.read_text(encoding="utf-8")) if model and path.is_file() else {}
    except ValueError as e:
        raise SystemExit(f"{path}: not valid JSON ({e})") from None
    kinds = ("reasoning", "tool")
    try:
        for kind, name in zip(kinds, names, strict=True):
            if name in parsers.TEMPLATE_PARSERS:
                parsers.get_spec(kind, name, tokenizer_config=config)
    except ValueError as e:
        raise SystemExit(f"{model}: {e}") from None


def check_model_source(model: str | None) -> None:
    """Refuse to start when ``MODEL`` is neither an existing folder nor a valid Hugging Face repo
    id (``namespace/name``), with one line instead of the loader's chained tracebacks.

    Raises:
        SystemExit: with the model and the reason.
    """
    if model is None or Path(model).expanduser().exists():
        return
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    try:
        validate_repo_id(model)
    except HFValidationError:
        raise SystemExit(f"{model}: no such model folder, and not a Hugging Face repo id") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "health":
        from . import healthcheck

        return healthcheck.main(parser, args.url, args.timeout, host=args.host, port=args.port)
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise SystemExit("--enable-auto-tool-choice requires --tool-call-parser")
    if args.prefill_url and not args.engine_url:
        raise SystemExit("--prefill-url requires --engine-url (the decode engines)")
    check_model_source(args.model_flag or args.model)
    check_parser_names(args.reasoning_parser, args.tool_call_parser)
    check_response_template(args.model_flag or args.model, (args.reasoning_parser, args.tool_call_parser))
    from .logging_setup import configure_logging
    from .server import serve

    configure_logging(args.log_level, args.log_format)
    ignored = ignored_vllm_flags(args)
    if ignored:
        import logging

        logging.getLogger("render_service").info(
            "vLLM options with no effect on a render service, ignored: %s", " ".join(ignored)
        )
    settings = settings_from_args(args)  # signing mode is logged by create_app in each worker
    return serve(settings, args.log_level)
