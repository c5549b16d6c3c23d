"""Engine logprobs (integer ids, ``GenerateLogProbs``) → OpenAI chat and completions shapes.

Chat: ``{"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
"bytes"}]}]}``. Completions: parallel lists ``{"text_offset", "token_logprobs", "tokens",
"top_logprobs": [{token: logprob} | None]}``.

Source of the behaviour: vLLM 0.33 ``_resolve_logprobs`` (upstream §7.4): ``top_logprobs`` is
cut to the endpoint's limit (engine order: sampled token first); a token whose own decode
ends in U+FFFD (part of a multi-byte character) gets its string rebuilt from up to
:data:`CONTEXT` preceding sampled ids, as vLLM's ``_correct_decoded_token`` does. Unlike
upstream, ``bytes`` are the token's true bytes (a partial UTF-8 token gets its own bytes, not
the repaired string's), as the OpenAI field intends. ``text_offset`` advances by the length
of each token string (code points), carried across stream chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .detokenize import Detokenizer

#: Preceding sampled ids kept to repair partial-UTF-8 token strings.
CONTEXT = 4
_REPLACEMENT = "\ufffd"


def _repair(detok: Detokenizer, token_id: int, context: Sequence[int]) -> str:
    """The text a partial-UTF-8 token completes, given the preceding sampled ids ("" if none)."""
    for n in range(1, min(len(context), CONTEXT) + 1):
        ctx = list(context[-n:])
        full = detok.decode([*ctx, token_id])
        if full.endswith(_REPLACEMENT):
            continue
        clean = len(ctx)
        while clean > 0 and detok.decode(ctx[clean - 1 : clean]).endswith(_REPLACEMENT):
            clean -= 1
        prefix = detok.decode(ctx[:clean])
        common = 0
        for a, b in zip(prefix, full, strict=False):
            if a != b:
                break
            common += 1
        return full[common:]
    return ""


def token_entry(detok: Detokenizer, token_id: int, logprob: float, context: Sequence[int]) -> dict[str, Any]:
    """One ``{"token", "logprob", "bytes"}`` entry (``bytes`` null for an id with no vocab entry)."""
    raw = detok.bytes_of(token_id)
    text = raw.decode("utf-8", errors="replace")
    if text.endswith(_REPLACEMENT):
        text = _repair(detok, token_id, context)
    known = detok.token_bytes is None or 0 <= token_id < len(detok.token_bytes)
    return {"token": text, "logprob": logprob, "bytes": list(raw) if known else None}


def to_chat(
    detok: Detokenizer, content: Sequence[Any], top_limit: int | None, context: Sequence[int] = ()
) -> tuple[dict[str, Any], tuple[int, ...]]:
    """Resolve one chunk's (or a whole output's) positions.

    Args:
        content: ``GenerateLogProbsContent`` items (``token_id``, ``logprob``, ``top_logprobs``).
        top_limit: keep the first k candidates (``None`` keeps all).
        context: sampled ids preceding this chunk (for U+FFFD repair).

    Returns:
        ``({"content": [...]}, last CONTEXT sampled ids)``.
    """
    ctx = list(context)
    out = []
    for entry in content:
        tops = entry.top_logprobs if top_limit is None else entry.top_logprobs[:top_limit]
        item = token_entry(detok, entry.token_id, entry.logprob, ctx)
        item["top_logprobs"] = [token_entry(detok, t.token_id, t.logprob, ctx) for t in tops]
        out.append(item)
        ctx.append(entry.token_id)
    return {"content": out}, tuple(ctx[-CONTEXT:])


def to_completion(
    chat: dict[str, Any], content: Sequence[Any], text_offset: int = 0
) -> tuple[dict[str, Any], int]:
    """Chat-shaped logprobs → completions parallel lists; returns them and the next offset.

    ``top_logprobs[i]`` is ``None`` where the engine had no candidates for position i.
    """
    offsets, tokens, values, tops = [], [], [], []
    for item, source in zip(chat["content"], content, strict=False):
        offsets.append(text_offset)
        tokens.append(item["token"])
        values.append(item["logprob"])
        tops.append({t["token"]: t["logprob"] for t in item["top_logprobs"]} if source.top_logprobs else None)
        text_offset += len(item["token"])
    lists = {"text_offset": offsets, "token_logprobs": values, "tokens": tokens, "top_logprobs": tops}
    return lists, text_offset


def chat_top_limit(logprobs: bool | None, top_logprobs: int | None, all_ids: bool) -> int | None:
    """Chat cut: ``top_logprobs`` (0 when unset); all for ``-1`` or ``logprob_token_ids``;
    all when the request did not ask for logprobs (upstream passes candidates through)."""
    if not logprobs or all_ids or top_logprobs == -1:
        return None
    return top_logprobs or 0


def completion_top_limit(logprobs: int | None, all_ids: bool) -> int | None:
    """Completions cut: the first ``logprobs + 1``; all for unset, ``-1`` or ``logprob_token_ids``."""
    if all_ids or logprobs is None or logprobs == -1:
        return None
    return max(logprobs + 1, 0)
