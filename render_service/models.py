"""The loaded model: tokenizer, chat template, generation defaults and token facts.

Loaded once at start-up by :func:`load_bundle`; immutable afterwards and shared by every request.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .errors import InvalidRequest, UnknownModel
from .memory import release_memory
from .settings import Settings

logger = logging.getLogger(__name__)

_T = TypeVar("_T")


class BundleMemo:
    """What is derived once from one bundle (its parser, derender pipeline, multimodal state,
    template probes), owned by the bundle: it lives exactly as long as the bundle does, so a
    process that drops a bundle frees everything built from it (no module-level cache holds it).

    Entries are keyed by a kind (``"pipeline"``, ``"parser"`` ...) and the identity of the
    settings object they were built under (a server has one); at most :data:`MAX_PER_KIND`
    settings are kept per kind, the oldest dropped first (a test process builds many). Thread-safe:
    each entry is built once (under a re-entrant lock, so one build may use another kind).
    """

    MAX_PER_KIND = 4

    __slots__ = ("_entries", "_lock")

    def __init__(self) -> None:
        self._entries: dict[str, dict[int, tuple[Any, Any]]] = {}
        self._lock = threading.RLock()

    def get(self, kind: str, settings: Any, build: Callable[[], _T]) -> _T:
        """The entry ``kind`` for ``settings`` (any object; ``None`` for one per bundle), built by
        ``build()`` on first use. Raises what ``build`` raises (nothing is kept then)."""
        entries = self._entries.get(kind)
        hit = entries.get(id(settings)) if entries is not None else None
        if hit is not None and hit[0] is settings:
            return hit[1]  # type: ignore[no-any-return]
        with self._lock:
            entries = self._entries.setdefault(kind, {})
            hit = entries.get(id(settings))
            if hit is not None and hit[0] is settings:
                return hit[1]  # type: ignore[no-any-return]
            value = build()
            entries[id(settings)] = (settings, value)  # settings held so its id stays its own
            while len(entries) > self.MAX_PER_KIND:
                entries.pop(next(iter(entries)))
            return value

#: Generation-config keys that become server-side sampling defaults (as vLLM's
#: ``ModelConfig.get_diff_sampling_param``).
GENERATION_DEFAULT_KEYS = (
    "repetition_penalty",
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "max_new_tokens",
)


@dataclass(frozen=True, slots=True, weakref_slot=True)
class ModelBundle:
    """Everything request handling needs to know about the served model.

    Attributes:
        names: accepted ``model`` names; ``names[0]`` is echoed.
        root: the folder or hub id it was loaded from.
        tokenizer: the Hugging Face tokenizer (fast, ``tokenizers``-backed).
        chat_template: Jinja source of the chat template in use.
        generation_defaults: sampling defaults from generation_config.json (subset of
            :data:`GENERATION_DEFAULT_KEYS`), empty with ``--generation-config vllm``.
        eos_token_ids: the tokenizer's EOS id plus generation_config ``eos_token_id`` ids.
        max_model_len: context length in tokens.
        vocab_size: number of ids the tokenizer can produce (added tokens included).
        special_token_ids: ids of tokens flagged ``special`` (dropped from text unless a
            parser uses them as markers).
        added_vocab: added-token text -> id (``<think>``, ``<|im_end|>`` ...).
        config: config.json contents (``model_type`` etc.), empty when absent.
        compiled_template: :attr:`chat_template` compiled once
            (:class:`render_service.chat_template.CompiledTemplate`), ``None`` without a template.
        prompt_encoder: encoder of templated prompt text, identical to
            ``tokenizer.encode(text, add_special_tokens=False)``: a prefix cache over the tiktoken
            fast path where it is proven identical (:mod:`render_service.tokens.prefix_cache`).
        memo: what is built once from this bundle (:class:`BundleMemo`); a fresh one for each
            bundle (also for ``dataclasses.replace`` copies), never compared.
    """

    names: tuple[str, ...]
    root: str
    tokenizer: Any
    chat_template: str | None
    generation_defaults: dict[str, Any]
    eos_token_ids: frozenset[int]
    max_model_len: int
    vocab_size: int
    special_token_ids: frozenset[int]
    added_vocab: dict[str, int]
    config: dict[str, Any]
    compiled_template: Any = None
    prompt_encoder: Any = None
    memo: BundleMemo = field(default_factory=BundleMemo, init=False, repr=False, compare=False)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        with path.open(encoding="utf-8") as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except FileNotFoundError:
        return {}


def _load_chat_template(settings: Settings, tokenizer: Any) -> str | None:
    """``--chat-template`` (a file path or inline Jinja), else the tokenizer's own template."""
    if settings.chat_template:
        candidate = Path(settings.chat_template)
        if candidate.is_file():
            return candidate.read_text(encoding="utf-8")
        if "{" not in settings.chat_template:
            raise InvalidRequest(f"--chat-template: no such file: {settings.chat_template}")
        return settings.chat_template
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):  # named templates: prefer "default"
        template = template.get("default") or next(iter(template.values()), None)
    return template


def _max_model_len(settings: Settings, config: dict[str, Any], tokenizer: Any) -> int:
    if settings.max_model_len:
        return settings.max_model_len
    for key in ("max_position_embeddings", "max_seq_len", "n_positions", "seq_length"):
        value = config.get(key) or (config.get("text_config") or {}).get(key)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    if isinstance(value, int) and 0 < value < 10**8:
        return value
    return 8192


def load_bundle(settings: Settings, tokenizer: Any = None) -> ModelBundle:
    """Load tokenizer, template and configs for ``settings.model_path``.

    ``tokenizer``: the Hugging Face tokenizer of that folder when the caller already loaded it
    (bundles of one folder under several settings can share it: it holds no per-settings data);
    loaded with ``AutoTokenizer.from_pretrained`` otherwise.

    Raises:
        OSError: the folder or hub id cannot be loaded (offline and not cached).
    """
    from transformers import AutoTokenizer

    root = settings.model_path
    if tokenizer is None:
        # --tokenizer / --tokenizer-revision / --revision as vLLM (the tokenizer revision defaults
        # to the model's)
        revision = settings.tokenizer_revision or settings.revision
        pinned = {"revision": revision} if revision else {}
        tokenizer = AutoTokenizer.from_pretrained(settings.tokenizer or root, **pinned)
    _drop_build_inputs(tokenizer)
    folder = Path(root)
    config = _read_json(folder / "config.json") if folder.is_dir() else {}
    gen_config = _read_json(folder / "generation_config.json") if folder.is_dir() else {}

    eos: set[int] = set()
    if tokenizer.eos_token_id is not None:
        eos.add(int(tokenizer.eos_token_id))
    gen_eos = gen_config.get("eos_token_id")
    if isinstance(gen_eos, int):
        eos.add(gen_eos)
    elif isinstance(gen_eos, list):
        eos.update(int(i) for i in gen_eos)

    defaults: dict[str, Any] = {}
    if settings.generation_config != "vllm":
        defaults = {k: gen_config[k] for k in GENERATION_DEFAULT_KEYS if k in gen_config}

    added_vocab = dict(tokenizer.get_added_vocab())
    special_ids = frozenset(int(i) for i in tokenizer.all_special_ids)
    decoder = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special_ids = special_ids | frozenset(
        int(i) for i, tok in decoder.items() if getattr(tok, "special", False)
    )

    chat_template = _load_chat_template(settings, tokenizer)
    compiled = None
    if chat_template:
        from .chat_template import compile_template, with_fast

        compiled = with_fast(compile_template(chat_template, dict(tokenizer.special_tokens_map)))

    return ModelBundle(
        names=settings.model_names,
        root=root,
        tokenizer=tokenizer,
        chat_template=chat_template,
        generation_defaults=defaults,
        eos_token_ids=frozenset(eos),
        max_model_len=_max_model_len(settings, config, tokenizer),
        vocab_size=len(tokenizer),
        special_token_ids=special_ids,
        added_vocab=added_vocab,
        config=config,
        compiled_template=compiled,
        prompt_encoder=_prompt_encoder(settings, tokenizer),
    )


def _drop_build_inputs(tokenizer: Any) -> None:
    """Free the Python copies of the vocabulary and merges that transformers 5 BPE tokenizers keep
    after building their Rust ``backend_tokenizer`` from them (``Qwen2Tokenizer._vocab`` /
    ``._merges``: ~70 MB for a 150k vocabulary), when no method of the tokenizer's class other than
    ``__init__`` reads them (checked on the compiled code). The vocabulary stays available through
    ``get_vocab()``, which reads the backend."""
    if getattr(tokenizer, "backend_tokenizer", None) is None:
        return
    names = [n for n in ("_vocab", "_merges") if isinstance(getattr(tokenizer, n, None), (dict, list))]
    if not names or _methods_read(type(tokenizer), set(names)):
        return
    for name in names:
        setattr(tokenizer, name, None)
    release_memory()


def _methods_read(cls: type, names: set[str]) -> bool:
    """Whether a method of ``cls`` or its bases, ``__init__`` aside, names one of ``names``."""
    todo = [
        getattr(fn, "__code__", None)
        for klass in cls.__mro__
        for key, member in vars(klass).items()
        if key != "__init__"
        for fn in _functions(member)
    ]
    while todo:
        code = todo.pop()
        if code is None or not hasattr(code, "co_names"):
            continue
        if names & set(code.co_names):
            return True
        todo += [c for c in code.co_consts if hasattr(c, "co_names")]
    return False


def _functions(member: Any) -> list[Any]:
    if isinstance(member, property):
        return [member.fget, member.fset, member.fdel]
    if isinstance(member, (staticmethod, classmethod)):
        return [member.__func__]
    return [member]


def _prompt_encoder(settings: Settings, tokenizer: Any) -> Any:
    """The prompt encoder (see :attr:`ModelBundle.prompt_encoder`); the fast encoder is proven and
    swapped in by a background thread, so start-up does not wait for it."""
    from .tokens.prefix_cache import build_prompt_encoder

    return build_prompt_encoder(tokenizer, settings.prefix_cache_bytes, background=True)


def token_id_limit(bundle: ModelBundle) -> int:
    """One past the largest valid token id: the larger of the tokenizer's size and the model's
    ``vocab_size`` (config.json's ``text_config``, else its top level), vLLM 0.33's bound
    (``BaseRenderer.validate_token_ids``). Ids the model can emit that the tokenizer has no text
    for (Qwen3: 151,669 tokenizer entries, 151,936 embedding rows) are valid and decode to
    nothing; an id at or above this bound no engine of the model can have produced."""
    config = bundle.config
    text = config.get("text_config")
    size = (text if isinstance(text, dict) and "vocab_size" in text else config).get("vocab_size")
    if not isinstance(size, int) or isinstance(size, bool):
        return bundle.vocab_size
    return max(bundle.vocab_size, size)


def check_model(bundle: ModelBundle, name: str | None) -> str:
    """Resolve a request's ``model`` field to the echoed name.

    Raises:
        UnknownModel: ``name`` is set and is not one of ``bundle.names`` (upstream message).
    """
    if name is None or name == "" or name in bundle.names:
        return bundle.names[0]
    raise UnknownModel(
        f"The model `{name}` does not exist. Valid aliases: {', '.join(bundle.names)}.", param="model"
    )


def read_model_facts(root: str, chat_template: str | None = None) -> Any:
    """The facts ``parsers.auto.choose`` reads, from a model folder (or a cached hub id):
    ``config.json`` ``architectures`` / ``model_type`` and the chat template text
    (``chat_template`` = ``--chat-template``, a file path or inline Jinja, wins over
    ``chat_template.jinja``, ``chat_template.json`` and ``tokenizer_config.json``). Missing
    files give empty facts (an unknown model). Returns a ``parsers.auto.ModelFacts``."""
    from parsers.auto import ModelFacts

    folder = Path(root)
    if not folder.is_dir():
        try:
            from huggingface_hub import try_to_load_from_cache

            hit = try_to_load_from_cache(root, "config.json")
            folder = Path(hit).parent if isinstance(hit, str) else folder
        except Exception:  # not a hub id either: no facts
            pass
    config = _read_json(folder / "config.json")
    template = ""
    if chat_template:
        candidate = Path(chat_template)
        template = candidate.read_text(encoding="utf-8") if candidate.is_file() else chat_template
    elif (folder / "chat_template.jinja").is_file():
        template = (folder / "chat_template.jinja").read_text(encoding="utf-8")
    else:
        raw = _read_json(folder / "chat_template.json").get("chat_template") or _read_json(
            folder / "tokenizer_config.json"
        ).get("chat_template")
        if isinstance(raw, list):  # named templates
            raw = " ".join(str(t.get("template", "")) for t in raw if isinstance(t, dict))
        template = raw if isinstance(raw, str) else ""
    archs = config.get("architectures") or ()
    return ModelFacts(
        architectures=tuple(str(a) for a in archs) if isinstance(archs, list) else (),
        model_type=str(config.get("model_type") or ""),
        chat_template=template,
    )
