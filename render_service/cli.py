"""Command line: ``render-service serve [MODEL] [flags]`` (flag names as ``vllm launch render``)."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Sequence

from .settings import Settings


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
    serve.add_argument("--default-chat-template-kwargs", type=json.loads, default=None,
                       help='JSON object, e.g. \'{"enable_thinking": false}\'')
    serve.add_argument("--max-model-len", type=int, default=None)
    serve.add_argument("--max-logprobs", type=int, default=20)
    serve.add_argument("--generation-config", default="auto", help="'auto' (model defaults) or 'vllm'")
    serve.add_argument("--keep-stop-strings", action="store_true",
                       help="keep `stop` in rendered sampling_params (engines that detokenize)")
    serve.add_argument("--renderer-num-workers", type=int, default=1)
    serve.add_argument("--log-level", default="info")
    serve.add_argument("--trust-request-chat-template", action="store_true",
                       help="accept a request's own chat_template")
    serve.add_argument("--exclude-tools-when-tool-choice-none", action="store_true")
    serve.add_argument("--chat-template-content-format", default="auto", choices=("auto", "string", "openai"))
    serve.add_argument("--template-max-seconds", type=float, default=5.0,
                       help="time budget for rendering one chat template (over budget: 400)")
    serve.add_argument("--template-max-chars", type=int, default=8_000_000,
                       help="size budget of one rendered prompt in characters (over budget: 400)")
    return parser


def settings_from_args(args: argparse.Namespace) -> Settings:
    """Map parsed flags to :class:`Settings`."""
    if args.reasoning_parser == "none":
        args.reasoning_parser = None
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
        chat_template_content_format=args.chat_template_content_format,
        template_max_seconds=args.template_max_seconds,
        template_max_chars=args.template_max_chars,
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.enable_auto_tool_choice and not args.tool_call_parser:
        raise SystemExit("--enable-auto-tool-choice requires --tool-call-parser")
    settings = settings_from_args(args)
    logging.basicConfig(level=args.log_level.upper())
    import uvicorn

    from .app import create_app

    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level=args.log_level)
    return 0
