"""The configured parser of a bundle: one ``parsers.Parser`` per bundle and settings.

Render asks it whether the prompt already ended reasoning and how forced tool calls are
constrained; derender feeds it the output. Both take the same instance from here, so neither wing
imports the other.
"""

from __future__ import annotations

from typing import Any

from .models import ModelBundle
from .settings import Settings
from .tokens.tokenization import vocab_lookup

_PARSERS: dict[tuple[int, int], tuple[ModelBundle, Settings, Any]] = {}
_MAX_CACHED = 4


def parser_for(bundle: ModelBundle, settings: Settings) -> Any:
    """The ``parsers.Parser`` for ``settings.reasoning_parser`` / ``settings.tool_call_parser``
    over the bundle's vocabulary, or ``None`` when neither is set. Built once per (bundle,
    settings) pair and cached (a server has one pair; tests load many, so the cache is bounded).

    Raises:
        KeyError: an unknown parser name (``parsers.get_parser``).
        ValueError: ``hf``/``beam`` on a model without ``response_template`` metadata.
    """
    key = (id(bundle), id(settings))
    hit = _PARSERS.get(key)
    if hit is not None and hit[0] is bundle and hit[1] is settings:
        return hit[2]
    parser = None
    if settings.reasoning_parser or settings.tool_call_parser:
        import parsers

        parser = parsers.get_parser(
            settings.reasoning_parser,
            settings.tool_call_parser,
            vocab=vocab_lookup(bundle),
            tokenizer_config=getattr(bundle.tokenizer, "init_kwargs", None),  # hf/beam: response_template
        )
    _PARSERS[key] = (bundle, settings, parser)
    while len(_PARSERS) > _MAX_CACHED:
        _PARSERS.pop(next(iter(_PARSERS)))
    return parser
