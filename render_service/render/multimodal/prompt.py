"""Multimodal chat prompts: media parts collected from the messages, each item loaded, hashed
and processed (cached by its hash), the template's placeholders expanded and the ``features``
object built, as vLLM 0.33's render does (reference multimodal.md §2–§7).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

import blake3
import numpy as np
from pydantic import TypeAdapter, ValidationError
from typing_extensions import Required, TypedDict

from ...errors import InvalidRequest, RenderServiceError
from ...models import ModelBundle
from ...settings import Settings
from . import hashing, image, resample, serde, video
from .cache import ByteBoundedCache
from .media import FetchPolicy, load_url
from .registry import VisionArch, arch_for

#: Content part ``type`` → modality. ``image_url``/``video_url`` carry ``{"url"}``; audio parts
#: are recognised only to be refused with upstream's limit message (no supported model has audio).
PART_MODALITY = {
    "image_url": "image",
    "video_url": "video",
    "input_audio": "audio",
    "audio_url": "audio",
    "input_image": "image",  # OpenAI Responses: ``{"type": "input_image", "image_url": "<url>"}``
}
#: Part type → the key holding its URL, where it is not the type itself (vLLM 0.33
#: ``MM_PARSER_MAP``: a Responses ``input_image`` carries ``image_url`` as a plain string).
URL_KEY = {"input_image": "image_url"}
#: Part types whose URL field is an object ``{"url": ...}`` (OpenAI's chat part types); a
#: Responses ``input_image`` carries a plain string.
OBJECT_URL_PARTS = frozenset({"image_url", "video_url", "audio_url"})
DEFAULT_LIMIT = 999
"""Items per modality per prompt when ``--limit-mm-per-prompt`` does not name it (as upstream)."""


@dataclass(frozen=True, slots=True)
class MediaPart:
    """One media content part in prompt order."""

    modality: str
    url: str | None
    uuid: str | None
    where: str


EMBEDS_PARTS = frozenset({"image_embeds", "audio_embeds"})
"""Precomputed-embedding parts: vLLM 0.33 refuses them unless started with ``--enable-mm-embeds``
(a render tier sends no embeddings, so here always, with vLLM's message)."""


class ResponseInputImageParam(TypedDict, total=False):
    """The OpenAI SDK's ``ResponseInputImageParam`` (openai 3.57), which vLLM 0.33 validates an
    ``input_image`` part against (``detail`` required, ``image_url`` a string)."""

    detail: Required[Literal["low", "high", "auto", "original"]]
    type: Required[Literal["input_image"]]
    file_id: str | None
    image_url: str | None


_INPUT_IMAGE = TypeAdapter(ResponseInputImageParam)


#: The keys a part without ``type`` (or with a ``uuid``) is read by, in vLLM 0.33's order
#: (``_parse_chat_message_content_part``): the first key present names the part.
INFERRED_KINDS = ("image_url", "image_pil", "image_embeds", "audio_embeds", "video_embeds",
                  "prompt_embeds", "audio_url", "input_audio", "video_url")
MISSING_TYPE = "Missing 'type' field in multimodal part. (parameter=type)"
IMAGE_DETAILS = ("auto", "low", "high", "original")


def part_kind(part: dict[str, Any]) -> tuple[Any, bool]:
    """``(kind, inferred)``: a media part's type as vLLM 0.33 reads it. A part without ``type``
    (or ``null``), and any part with a ``uuid``, is named by the first of :data:`INFERRED_KINDS`
    it holds (so ``{"image_url": "data:..."}`` is an image, and a ``uuid`` part holding
    ``video_url`` is a video whatever its ``type``). A part without ``type`` holding none of them
    is text when it holds ``text`` (a deliberate difference: README), else ``None``.

    Raises:
        InvalidRequest: vLLM's ``Missing 'type' field in multimodal part.`` for a part that
            names nothing (``{}``, ``{"foo": 1}``, a ``uuid`` part without a media key).
    """
    kind = part.get("type")
    if kind is not None and part.get("uuid") is None:
        return kind, False
    inferred = next((key for key in INFERRED_KINDS if key in part), None)
    if inferred is not None:
        return inferred, True
    if kind is None and "text" in part:
        return "text", False
    raise InvalidRequest(MISSING_TYPE, param="type")


class ImageURL(TypedDict, total=False):
    """The OpenAI SDK's ``ImageURL`` (openai 3.57) of a chat ``image_url`` part."""

    url: Required[str]
    detail: Literal["auto", "low", "high", "original"]


class ChatCompletionContentPartImageParam(TypedDict, total=False):
    """The OpenAI SDK's chat image part, which vLLM 0.33 validates an ``image_url`` part against."""

    image_url: Required[ImageURL]
    type: Required[Literal["image_url"]]


_IMAGE_PART = TypeAdapter(ChatCompletionContentPartImageParam)


def _check_image_detail(part: dict[str, Any]) -> None:
    """An ``image_url`` part's ``detail`` is one of OpenAI's values: vLLM 0.33 validates the part
    as the SDK's ``ChatCompletionContentPartImageParam``, and answers any other value (``null``
    included) with pydantic's text for that type; the value itself changes nothing, as upstream.

    Raises:
        InvalidRequest: ``detail`` present and not ``auto``/``low``/``high``/``original``.
    """
    spec = part.get("image_url")
    if isinstance(spec, dict) and "detail" in spec and spec["detail"] not in IMAGE_DETAILS:
        try:  # only the detail is checked here: the URL has its own checks and messages
            _IMAGE_PART.validate_python({"image_url": {"url": "", "detail": spec["detail"]}, "type": "image_url"})
        except ValidationError as err:
            raise InvalidRequest(str(err)) from None


def _check_input_image(part: dict[str, Any]) -> None:
    """Raises InvalidRequest with pydantic's text, as vLLM 0.33 answers an ``input_image`` part that
    is not a ``ResponseInputImageParam`` (e.g. ``1 validation error for ResponseInputImageParam
    detail Field required ...``)."""
    try:
        _INPUT_IMAGE.validate_python(part)
    except ValidationError as err:
        raise InvalidRequest(str(err)) from None


@dataclass(slots=True)
class MediaCollector:
    """Sink for :func:`render_service.render.messages.normalize`: takes media parts, enforces
    ``--limit-mm-per-prompt`` as they arrive, and names the template part for each."""

    arch: VisionArch
    limits: dict[str, int]
    parts: list[MediaPart] = field(default_factory=list)

    def accept(self, part: dict[str, Any], where: str) -> str | None:
        """The modality of a media part (recorded), or ``None`` for a non-media part.

        Raises:
            InvalidRequest: over the modality's limit (upstream text, ``param`` the modality),
                malformed part.
        """
        if part.get("type") == "image_url":
            _check_image_detail(part)
        kind, inferred = part_kind(part)
        if not isinstance(kind, str):  # a list / object / number: no media; the text path refuses it
            return None
        if kind in EMBEDS_PARTS:
            raise InvalidRequest(f"You must set `--enable-mm-embeds` to input `{kind}` (parameter={kind})",
                                 param=str(kind))
        modality = PART_MODALITY.get(kind)
        if modality is None:
            return None
        if kind == "input_image" and not inferred:
            _check_input_image(part)
        count = sum(p.modality == modality for p in self.parts) + 1
        limit = self.limits.get(modality, DEFAULT_LIMIT if modality in self.arch.modalities else 0)
        if count > limit:
            raise InvalidRequest(
                f"At most {limit} {modality}(s) may be provided in one prompt. (parameter={modality})",
                param=modality,
            )
        key = URL_KEY.get(str(kind), str(kind))
        spec = part.get(key)
        if kind in OBJECT_URL_PARTS and not inferred and spec is not None and not isinstance(spec, dict):
            raise InvalidRequest(  # vLLM 0.33: OpenAI's part types, ``{"url": ...}`` objects: 400
                f"{kind} must be an object {{\"url\": ...}}", param=f"{where}.{key}"
            )
        url = spec.get("url") if isinstance(spec, dict) else spec
        if kind == "input_image" and url is None and part.get("file_id") is not None:
            raise InvalidRequest("input_image.file_id is not supported (no file store): send image_url",
                                 param=f"{where}.file_id")
        uuid = part.get("uuid")
        if url is not None and not isinstance(url, str):
            field = key if key != kind else f"{kind}.url"
            raise InvalidRequest(f"{field} must be a string", param=f"{where}.{field}")
        if uuid is not None:  # vLLM 0.33 (chat_message.py): ``str(uuid)``, so 123 is the hash "123"
            uuid = str(uuid)
        if url is None and uuid is None:
            raise InvalidRequest(f"{kind} needs a url (or a uuid seen before)", param=f"{where}.{key}")
        self.parts.append(MediaPart(modality, url, uuid, where))
        return modality

    def placeholder(self, modality: str) -> str:
        """The placeholder text a ``string``-format template gets for one item."""
        token = self.arch.image_token if modality == "image" else self.arch.video_token
        return f"{self.arch.vision_start}{token}{self.arch.vision_end}"


@dataclass(frozen=True, slots=True)
class Processed:
    """One processed item, ready to send: its hash, placeholder replacement and encodings."""

    modality: str
    mm_hash: str
    replacement: tuple[int, ...]
    pad_token: int
    kwargs_b64: serde.B64Payload  # sent without a copy into one JSON string (serving)
    metadata_b64: str | None
    decoded_bytes: int = 0  # RGB bytes its media decodes to (the request's decode budget)

    @property
    def nbytes(self) -> int:
        """Approximate memory held (cache accounting)."""
        return len(self.kwargs_b64) + len(self.metadata_b64 or "") + 8 * len(self.replacement) + 200


@dataclass(frozen=True)
class MultimodalState:
    """Per (model, settings): the family, the fetch policy and the processed-item cache."""

    arch: VisionArch
    policy: FetchPolicy
    cache: ByteBoundedCache[Processed]
    model_id: str
    token_ids: dict[str, int]
    stamp_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)
    """Token ids of Qwen3-VL's ``<t seconds>`` texts already tokenized (:func:`stamp_tokens`)."""


STAMP_TEXTS = 4096
"""Timestamp texts whose token ids :func:`stamp_tokens` keeps (the first ones seen)."""


def stamp_tokens(state: MultimodalState, tokenizer: Any, seconds: float) -> tuple[int, ...]:
    """Token ids of Qwen3-VL's ``<{seconds:.1f} seconds>`` (``add_special_tokens=False``, as vLLM's
    ``Qwen3VLProcessor`` expands a video), tokenized once per text: videos of a frame rate share
    their timestamps, and two tokenizer calls cost ~0.04 ms per video (the same ids)."""
    text = f"<{seconds:.1f} seconds>"
    ids = state.stamp_ids.get(text)
    if ids is None:
        ids = tuple(tokenizer.encode(text, add_special_tokens=False))
        if len(state.stamp_ids) < STAMP_TEXTS:
            state.stamp_ids[text] = ids
    return ids


def state_for(bundle: ModelBundle, settings: Settings) -> MultimodalState | None:
    """The multimodal state of a served model, ``None`` for a text-only model (built once per
    bundle and settings, kept by the bundle: :class:`~render_service.models.BundleMemo`)."""
    return bundle.memo.get("multimodal", settings, lambda: _new_state(bundle, settings))


def _new_state(bundle: ModelBundle, settings: Settings) -> MultimodalState | None:
    arch = arch_for(bundle.config, bundle.root)
    if arch is None:
        return None
    image.configure_pillow()
    resample.start()  # compiled in the background; Pillow (same bytes) until it is ready
    if "video" in arch.modalities:  # PyAV imported in the background, not by the first video
        threading.Thread(target=video.preload, name="pyav-import", daemon=True).start()
    vocab = bundle.added_vocab
    policy = FetchPolicy(
        settings.allowed_local_media_path,
        tuple(settings.allowed_media_domains),
        settings.allow_private_media_urls,
        settings.media_fetch_timeout,
        settings.media_max_bytes,
        settings.media_max_redirects,
    )
    tokens = {
        name: vocab[name] for name in (arch.image_token, arch.video_token, arch.vision_start, arch.vision_end)
    }
    cache: ByteBoundedCache[Processed] = ByteBoundedCache(settings.mm_cache_bytes, lambda p: p.nbytes)
    return MultimodalState(arch, policy, cache, bundle.root, tokens)


def collector(bundle: ModelBundle, settings: Settings) -> MediaCollector | None:
    """A fresh collector for one request, ``None`` for a text-only model."""
    state = state_for(bundle, settings)
    return None if state is None else MediaCollector(state.arch, dict(settings.limit_mm_per_prompt))


# ---------------------------------------------------------------------------------------------
# per-request kwargs


def request_kwargs(settings: Settings, extra: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request's ``(mm_processor_kwargs, media_io_kwargs)``, refused unless trusted.

    Raises:
        InvalidRequest: present without ``--trust-request-mm-kwargs`` (upstream text), not objects.
    """
    mm = extra.get("mm_processor_kwargs") or {}
    io_kw = extra.get("media_io_kwargs") or {}
    if not isinstance(mm, dict):
        raise InvalidRequest("mm_processor_kwargs must be an object", param="mm_processor_kwargs")
    if not isinstance(io_kw, dict) or not all(isinstance(v, dict) for v in io_kw.values()):
        raise InvalidRequest("media_io_kwargs must map a modality to an object", param="media_io_kwargs")
    if not settings.trust_request_mm_kwargs:
        if mm:
            raise InvalidRequest(
                "Per-request mm_processor_kwargs are disabled by default because they can change "
                "multimodal preprocessing resource usage. Start the server with --trust-request-mm-kwargs "
                "only when clients are trusted. (parameter=mm_processor_kwargs)",
                param="mm_processor_kwargs",
            )
        if io_kw:
            raise InvalidRequest(
                "Per-request media_io_kwargs are disabled by default because they can change multimodal "
                "media loading resource usage. Start the server with --trust-request-mm-kwargs only when "
                "clients are trusted. (parameter=media_io_kwargs)",
                param="media_io_kwargs",
            )
    return mm, io_kw


def check_media_io_kwargs(io_kw: dict[str, Any]) -> None:
    """Refuse media-io kwargs the decoders cannot use, before any media is loaded: ``io_kw`` maps a
    modality to its kwargs (``--media-io-kwargs`` at start-up, a request's ``media_io_kwargs``, or
    the two merged for one part).

    ``image.rgba_background_color``: a list or tuple of 3 integers in [0, 255], vLLM 0.33's check
    and wording (``ImageMediaIO.__init__``). ``video.fps``: a positive number (vLLM does
    not check it; 0 or a string failed deep in the decoder here). ``num_frames`` is not checked:
    these families only hash it, and vLLM 0.33 takes ``4.5`` or ``"4"`` alike.

    Raises:
        InvalidRequest: a value out of those shapes (``param`` null for the colour, as vLLM's;
            ``media_io_kwargs`` for the others).
    """
    image_kw, video_kw = io_kw.get("image") or {}, io_kw.get("video") or {}
    if "rgba_background_color" in image_kw:
        color = image_kw["rgba_background_color"]
        if not (
            isinstance(color, (list, tuple))
            and len(color) == 3
            and all(isinstance(c, int) and 0 <= c <= 255 for c in color)
        ):
            raise InvalidRequest(
                "rgba_background_color must be a list or tuple of 3 integers in the range [0, 255]."
            )
    fps = video_kw.get("fps")
    if "fps" in video_kw and (isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0):
        raise InvalidRequest("video fps must be a positive number", param="media_io_kwargs")


_SCOPED = {"image": "images_kwargs", "video": "videos_kwargs", "audio": "audio_kwargs"}


def _scoped(kwargs: dict[str, Any], modality: str) -> dict[str, Any]:
    """Kwargs that apply to ``modality``: unscoped keys plus its own ``<modality>s_kwargs``."""
    out = {k: v for k, v in kwargs.items() if k not in _SCOPED.values()}
    own = kwargs.get(_SCOPED[modality])
    return {**out, _SCOPED[modality]: own} if isinstance(own, dict) else out


PIXEL_KEYS = ("min_pixels", "max_pixels")
SIZE_KEYS = ("shortest_edge", "longest_edge")


def check_pixel_kwargs(kwargs: dict[str, Any], modality: str | None = None) -> None:
    """``min_pixels`` / ``max_pixels`` (and ``size.shortest_edge`` / ``size.longest_edge``), at the
    top of processor kwargs or under ``images_kwargs`` / ``videos_kwargs``, are positive integers:
    vLLM 0.33's processor refuses a string or a float (``Failed to apply ...Processor``); a minimum
    over the maximum is its (and HF ``smart_resize``'s) to resolve, not an error. ``modality``:
    only the top level and that modality's ``<modality>s_kwargs`` are checked (vLLM applies, and
    so refuses, only those); ``None`` (a start-up flag): every scope.

    Raises:
        InvalidRequest: another value (``param`` ``mm_processor_kwargs``).
    """
    own = _SCOPED.values() if modality is None else (_SCOPED[modality],)
    scopes = [kwargs, *(kwargs.get(k) for k in own)]
    for scope in scopes:
        if scope is None:
            continue
        if not isinstance(scope, dict):
            raise InvalidRequest("images_kwargs / videos_kwargs must be objects", param="mm_processor_kwargs")
        values = [(k, scope[k]) for k in PIXEL_KEYS if k in scope]
        if "size" in scope:  # HF's Qwen2-VL processors need both edges (vLLM 0.33: 400 otherwise)
            size = scope["size"]
            if not isinstance(size, dict) or not all(k in size for k in SIZE_KEYS):
                raise InvalidRequest("size must be an object with shortest_edge and longest_edge",
                                     param="mm_processor_kwargs")
            values += [(f"size.{k}", size[k]) for k in SIZE_KEYS]
        for name, value in values:
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise InvalidRequest(f"{name} must be a positive integer, got {value!r}",
                                     param="mm_processor_kwargs")


PATCHING_KEYS = ("patch_size", "merge_size", "temporal_patch_size")


def check_patching_kwargs(kwargs: dict[str, Any], arch: VisionArch) -> None:
    """Processor kwargs may not change the model's patching (``patch_size``, ``merge_size``,
    ``temporal_patch_size``): the vision encoder's weights are made for one, so a request asking
    for another would send the engine patches it cannot embed. vLLM 0.33 applies them (a 640×480
    image with ``patch_size`` 16 on Qwen2.5-VL: 300 placeholders instead of 391); this render
    refuses them unless they equal the model's (README, deliberate differences). ``kwargs``: the
    merged kwargs scoped to the item's modality.

    Raises:
        InvalidRequest: a patching key with another value (``param`` ``mm_processor_kwargs``).
    """
    for scope in (kwargs, *(v for k, v in kwargs.items() if k in _SCOPED.values() and isinstance(v, dict))):
        for key in PATCHING_KEYS:
            if key in scope and scope[key] != getattr(arch, key):
                raise InvalidRequest(
                    f"mm_processor_kwargs {key}={scope[key]!r} would change the model's patching "
                    f"({key} is {getattr(arch, key)}), which its vision encoder cannot take",
                    param="mm_processor_kwargs",
                )


def _pixel_bounds(arch: VisionArch, modality: str, kwargs: dict[str, Any]) -> tuple[int, int]:
    """The ``smart_resize`` bounds of ``modality``: the model's, under the processor kwargs'
    (``kwargs`` scoped to ``modality``, checked by :func:`check_pixel_kwargs` when planned)."""
    lo, hi = (
        (arch.image_min_pixels, arch.image_max_pixels)
        if modality == "image"
        else (arch.video_min_pixels, arch.video_max_pixels)
    )
    flat = {**kwargs, **(kwargs.get(_SCOPED[modality]) or {})}
    raw_size = flat.get("size")
    size: dict[str, Any] = raw_size if isinstance(raw_size, dict) else {}
    return int(flat.get("min_pixels", size.get("shortest_edge", lo))), int(flat.get("max_pixels", size.get("longest_edge", hi)))


# ---------------------------------------------------------------------------------------------
# processing one item

Outcome = tuple[list[int], dict[str, serde.Field], tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class ItemSpec:
    """What decides one item's processing and hash (the cache key covers all of it)."""

    modality: str
    data: bytes
    proc: dict[str, Any]  # merged processor kwargs, scoped to the modality
    io_kw: dict[str, Any]  # merged media-io kwargs of the modality
    factors: dict[str, Any]  # hash factors (request processor kwargs, media-io kwargs)


def _key(spec: ItemSpec, algorithm: str) -> str:
    import orjson

    tail = orjson.dumps([spec.proc, spec.io_kw, spec.factors, algorithm], option=orjson.OPT_SORT_KEYS)
    return f"{spec.modality}:{blake3.blake3(spec.data).hexdigest()}:{blake3.blake3(tail).hexdigest()[:32]}"


def _image(state: MultimodalState, spec: ItemSpec, settings: Settings,
           budget: video.DecodeBudget) -> tuple[str, Outcome]:
    arch = state.arch
    header = image.header_pixels(spec.data)
    if header <= settings.max_image_pixels:  # else decode_image refuses it by its header, as before
        budget.spend(3 * header)
    background = tuple(spec.io_kw.get("rgba_background_color", image.RGBA_BACKGROUND))
    img, converted = image.decode_image(spec.data, settings.max_image_pixels, background)
    io_config = {"image_mode": "RGB", "rgba_background_color": background} if converted else None
    mm_hash = hashing.hash_item(
        settings.mm_hasher_algorithm,
        state.model_id,
        "image",
        hashing.EncodedImage(spec.data, io_config),
        spec.factors,
    )
    lo, hi = _pixel_bounds(arch, "image", spec.proc)
    pixels, grid = image.process_image(img, arch, lo, hi, settings.max_image_pixels)
    n = pixels.shape[0] // (arch.merge_size**2)
    fields = {
        "pixel_values": serde.Field(pixels, "flat", False, [[[0, pixels.shape[0], None]]]),
        "image_grid_thw": serde.Field(np.array(grid, dtype=np.int64), "batched", True),
    }
    return mm_hash, ([state.token_ids[arch.image_token]] * n, fields, ("image_grid_thw",))


def _video(state: MultimodalState, spec: ItemSpec, settings: Settings, tokenizer: Any,
           budget: video.DecodeBudget) -> tuple[str, Outcome]:
    arch = state.arch
    decoded = video.decode_video(spec.data, arch, settings.max_image_pixels, spec.io_kw, budget)
    meta = video.hash_metadata(decoded)
    frames_or_bytes: Any = decoded.frames if decoded.frames.nbytes < len(spec.data) else spec.data
    mm_hash = hashing.hash_item(
        settings.mm_hasher_algorithm,
        state.model_id,
        "video",
        (hashing.EncodedVideo(frames_or_bytes, meta), meta),
        spec.factors,
    )
    lo, hi = _pixel_bounds(arch, "video", spec.proc)
    pixels, grid, stamps = video.process_video(decoded, arch, lo, hi, settings.max_image_pixels)
    per_group = grid[1] * grid[2] // (arch.merge_size**2)
    pad = state.token_ids[arch.video_token]
    pv = serde.Field(pixels, "flat", False, [[[0, pixels.shape[0], None]]])
    thw = serde.Field(np.array(grid, dtype=np.int64), "batched", True)
    if arch.video_mode == "timestamps":
        replacement: list[int] = []
        for t in stamps:
            replacement += stamp_tokens(state, tokenizer, t)
            replacement += [
                state.token_ids[arch.vision_start],
                *[pad] * per_group,
                state.token_ids[arch.vision_end],
            ]
        fields = {
            "pixel_values_videos": pv,
            "video_grid_thw": thw,
            "timestamps": serde.Field([float(t) for t in stamps], "batched", True),
        }
        return mm_hash, (replacement, fields, ("video_grid_thw", "timestamps"))
    # seconds per temporal patch of the frames actually sampled (HF ``Qwen2_5_VLProcessor``:
    # ``temporal_patch_size / metadata.sampled_fps``), not of the fps asked for: a 1 fps clip is
    # 2.0, 2 frames at 8 fps 0.25 (measured against vLLM 0.33 by round 29's newcomer)
    seconds = serde.bfloat16(np.array(arch.temporal_patch_size / decoded.sampled_fps, dtype=np.float32))
    fields = {
        "pixel_values_videos": pv,
        "video_grid_thw": thw,
        "second_per_grid_ts": serde.Field(seconds, "batched", True),
    }
    return mm_hash, ([pad] * (per_group * grid[0]), fields, ("video_grid_thw", "second_per_grid_ts"))


LARGE_IMAGE_PIXELS = 4_000_000
"""Images of at least this many pixels (header) are processed :data:`LARGE_AT_ONCE` at a time per
process: each holds a few hundred MB while it is decoded, resized and encoded (a 4000×3000 JPEG:
48 MB decoded, 72 MB of patches, 96 MB of base64), so the threads of a replica must not all do it
at once; the CPU is the limit anyway."""
LARGE_AT_ONCE = 2
_LARGE = threading.BoundedSemaphore(LARGE_AT_ONCE)


def _process(
    state: MultimodalState, spec: ItemSpec, key: str, settings: Settings, tokenizer: Any,
    budget: video.DecodeBudget,
) -> Processed:
    """The processed item, from the cache when the same bytes were processed the same way
    (``key``: :func:`_key` of ``spec``); its decoded bytes are spent from ``budget`` either way
    (vLLM 0.33 decodes a request's media before its processor cache is asked).

    Raises:
        NeedsWorker: not cached, under :func:`cached_only`.
        InvalidRequest: over the request's decode budget, or the item's own errors.
    """
    hit = state.cache.get(key)
    if hit is not None:
        budget.spend(hit.decoded_bytes)
        return hit
    if is_cached_only():
        raise NeedsWorker("a media item is not in the processed-media cache")
    large = spec.modality == "image" and image.header_pixels(spec.data) >= LARGE_IMAGE_PIXELS
    if large:
        _LARGE.acquire()
        hit = state.cache.get(key)  # processed by another request meanwhile
        if hit is not None:
            _LARGE.release()
            budget.spend(hit.decoded_bytes)
            return hit
    try:
        processed = _processed(state, spec, settings, tokenizer, budget)
    finally:
        if large:
            _LARGE.release()
    state.cache.put(key, processed)
    return processed


def _processed(state: MultimodalState, spec: ItemSpec, settings: Settings, tokenizer: Any,
               budget: video.DecodeBudget) -> Processed:
    before = budget.used
    if spec.modality == "image":
        mm_hash, (replacement, fields, meta_names) = _image(state, spec, settings, budget)
    else:
        mm_hash, (replacement, fields, meta_names) = _video(state, spec, settings, tokenizer, budget)
    meta = {k: fields[k] for k in meta_names}
    return Processed(
        spec.modality,
        mm_hash,
        tuple(replacement),
        state.token_ids[state.arch.image_token if spec.modality == "image" else state.arch.video_token],
        serde.encode_payload(fields),
        serde.encode_item(meta) if meta else None,
        budget.used - before,
    )


@dataclass(frozen=True, slots=True)
class MediaResult:
    """The processed items of one prompt, in prompt order, with their reported hashes."""

    items: list[Processed]
    hashes: list[str]


@dataclass(frozen=True, slots=True)
class PlannedPart:
    """One media part with what its processing needs: the reported hash (from a ``uuid``), and
    for a part with a URL its loaded :class:`ItemSpec` and cache key (``None`` for uuid-only)."""

    part: MediaPart
    reported: str | None
    spec: ItemSpec | None
    key: str | None


class NeedsWorker(Exception):  # noqa: N818 - a signal to the caller, not an error of the request
    """Raised under :func:`cached_only` where the render would do more than look its media up:
    an item not in the processed-media cache, a URL other than ``data:`` (a fetch or file read),
    a part whose loading fails (the ordinary render raises its error, in its order). The render
    has had no side effect then: run it again, on a worker thread, without the flag.

    ``plan``: when only processing is missing (every part loaded), the planned parts (data URLs
    decoded, cache keys); run the worker's render under :func:`reusing_plan` of it so that it
    does not decode and key them again (``None`` otherwise). ``must_load``: a part's URL must be
    fetched or its file read (load it under :func:`loading_only` first, off the worker pool).
    Also raised under :func:`loading_only` once the media is loaded."""

    def __init__(self, reason: str, plan: list[PlannedPart] | None = None, must_load: bool = False) -> None:
        super().__init__(reason)
        self.plan = plan
        self.must_load = must_load


_LOCAL = threading.local()


@contextmanager
def _on_this_thread(name: str, value: Any) -> Iterator[None]:
    """``_LOCAL.<name>`` is ``value`` within the block (``None`` / ``False`` after it)."""
    setattr(_LOCAL, name, value)
    try:
        yield
    finally:
        setattr(_LOCAL, name, None if not isinstance(value, bool) else False)


def cached_only() -> AbstractContextManager[None]:
    """Within the block, on this thread, a render may only serve media from the cache: anything
    else raises :class:`NeedsWorker` before it is done. The render lane runs a vision model's
    render this way on the event loop (a cached item costs a lookup, less than the hand-off to a
    worker thread) and hands it to a worker on :class:`NeedsWorker`."""
    return _on_this_thread("cached_only", True)


def is_cached_only() -> bool:
    """Whether this thread is within :func:`cached_only`."""
    return getattr(_LOCAL, "cached_only", False)


def loading_only() -> AbstractContextManager[None]:
    """Within the block, on this thread, a chat render loads its media parts (fetches URLs, reads
    files, decodes data URLs, keys them) and then stops with :class:`NeedsWorker` carrying the
    plan, before any processing, template or encoding (``plan`` ``None``: nothing to load). The
    render lane runs a render whose media must be fetched this way on an I/O thread outside the
    worker pool, then the rest on the pool under :func:`reusing_plan`: a slow media server holds
    an I/O thread, not one of the ``--renderer-threads`` every other render needs."""
    return _on_this_thread("loading_only", True)


def is_loading_only() -> bool:
    """Whether this thread is within :func:`loading_only`."""
    return getattr(_LOCAL, "loading_only", False)


def reusing_plan(plan: list[PlannedPart] | None) -> AbstractContextManager[None]:
    """Within the block, on this thread, a render takes each media part's loaded bytes and
    cache key from ``plan`` (:attr:`NeedsWorker.plan` of the same request's refused attempt)
    where the part is the same (its URL, modality and processing/hash settings equal), instead of
    decoding its data URL and hashing it again; any other part is loaded as usual."""
    return _on_this_thread("plan", plan)


def _earlier(index: int, part: MediaPart, proc: dict[str, Any], io_kw: dict[str, Any],
             factors: dict[str, Any]) -> tuple[ItemSpec, str] | None:
    """The spec and key :func:`reusing_plan` holds for part ``index``, when it is the same part."""
    plan: list[PlannedPart] | None = getattr(_LOCAL, "plan", None)
    if plan is None or index >= len(plan):
        return None
    p = plan[index]
    if (p.spec is None or p.key is None or p.part.url != part.url or p.spec.modality != part.modality
            or p.spec.proc != proc or p.spec.io_kw != io_kw or p.spec.factors != factors):
        return None
    return p.spec, p.key


def plan_parts(
    bundle: ModelBundle, settings: Settings, parts: list[MediaPart], extra: dict[str, Any]
) -> list[PlannedPart]:
    """Each part's reported hash, loaded bytes and cache key (no processing). Under
    :func:`cached_only` it checks that every item is in the cache, else :class:`NeedsWorker`.

    Raises:
        InvalidRequest / MediaFetchFailed: as :func:`process_parts`; under :func:`cached_only`
            :class:`NeedsWorker` instead of any of them.
    """
    state = state_for(bundle, settings)
    assert state is not None
    inline = is_cached_only()
    try:
        planned = list(_plan(state, settings, parts, extra, inline))
    except RenderServiceError:
        if inline:
            raise NeedsWorker("a media part fails: the ordinary render answers it") from None
        raise
    if inline:
        keys = [state.cache.alias_of(p.reported or "") if p.key is None else _seen_uuid(state, p.reported) or p.key
                for p in planned]
        if not all(key in state.cache for key in keys):
            raise NeedsWorker("a media item is not in the processed-media cache", planned)
    return planned


def _plan(state: MultimodalState, settings: Settings, parts: list[MediaPart], extra: dict[str, Any],
          inline: bool) -> Iterator[PlannedPart]:
    """The parts planned one at a time (:func:`process_parts` loads each just before processing it,
    so errors come in the order they always came)."""
    req_proc, req_io = request_kwargs(settings, extra)
    for index, part in enumerate(parts):
        check_pixel_kwargs({**settings.mm_processor_kwargs, **req_proc}, part.modality)
        proc = _scoped({**settings.mm_processor_kwargs, **req_proc}, part.modality)
        check_patching_kwargs(proc, state.arch)
        io_kw = {**(settings.media_io_kwargs.get(part.modality) or {}), **(req_io.get(part.modality) or {})}
        factors: dict[str, Any] = {}
        if _scoped(req_proc, part.modality):
            factors["mm_processor_kwargs"] = _scoped(req_proc, part.modality)
        if io_kw:
            check_media_io_kwargs({part.modality: io_kw})
            factors["media_io_kwargs"] = {part.modality: io_kw}
        reported = None
        if part.uuid is not None:
            reported = (
                part.uuid
                if not factors
                else hashing.hash_item(
                    settings.mm_hasher_algorithm, state.model_id, part.modality, part.uuid, factors
                )
            )
        if part.url is None:
            yield PlannedPart(part, reported, None, None)
            continue
        if inline and not part.url[:5].lower().startswith("data:"):
            raise NeedsWorker("a media URL must be fetched or read", must_load=True)
        earlier = None if inline else _earlier(index, part, proc, io_kw, factors)
        if earlier is not None:
            yield PlannedPart(part, reported, *earlier)
            continue
        spec = ItemSpec(part.modality, load_url(part.url, state.policy), proc, io_kw, factors)
        yield PlannedPart(part, reported, spec, _key(spec, settings.mm_hasher_algorithm))


def _seen_uuid(state: MultimodalState, reported: str | None) -> str | None:
    """The cache key of the item first sent with this reported hash (a ``uuid``), if it is still
    held: vLLM 0.33 looks processed items up by ``mm_hash``, so a part whose uuid was seen gets that
    item even when its URL now holds other media (the peer answered a different image sent under
    a seen uuid with the first image's tokens). ``None``: no uuid, or not seen."""
    if reported is None:
        return None
    key = state.cache.alias_of(reported)
    return key if key != reported and key in state.cache else None


def process_parts(
    bundle: ModelBundle, settings: Settings, parts: list[MediaPart], extra: dict[str, Any],
    planned: list[PlannedPart] | None = None,
) -> MediaResult:
    """Load, hash and process each media part (cached by content and settings); ``planned``:
    :func:`plan_parts` of the same arguments, when the caller made it already.

    A ``uuid`` on a part is its reported hash when there are no hash factors (else the uuid is
    hashed with them, as upstream); a part with a uuid and no URL must have been seen before.

    Raises:
        InvalidRequest: untrusted kwargs, a bad URL / file / image / video, a uuid-only item not
            seen before, the request's decoded media over ``VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES``
            (:class:`~.video.DecodeBudget`); MediaFetchFailed (502) when an http(s) fetch fails; NeedsWorker under
            :func:`cached_only` (see :func:`plan_parts`).
    """
    state = state_for(bundle, settings)
    assert state is not None
    items, hashes = [], []
    budget = video.DecodeBudget()  # the request's decoded media (VLLM_MAX_MEDIA_REQUEST_DECODE_BYTES)
    seen_of: Counter[str] = Counter()  # items per modality so far: a part's index in its modality
    for p in planned if planned is not None else _plan(state, settings, parts, extra, is_cached_only()):
        part, reported = p.part, p.reported
        index = seen_of[part.modality]
        seen_of[part.modality] += 1
        if p.spec is None or p.key is None:
            item = state.cache.get(reported or "", alias=True)
            if item is None:
                if is_cached_only():
                    raise NeedsWorker("a uuid-only item is not in the processed-media cache")
                if state.cache.capacity > 0:  # vLLM 0.33 with its processor cache (the default)
                    raise InvalidRequest(
                        f"Cache miss for {part.modality} at index {index} but data is not provided.")
                data_name = "images" if part.modality == "image" else f"{part.modality}s"
                raise InvalidRequest(  # vLLM 0.33 with --mm-processor-cache-gb 0
                    f"Failed to apply {state.arch.processor_name} on data={{'{data_name}': [None]}} with "
                    "kwargs={}: the item was sent as uuid only and is not in the processed-media cache",
                    param=part.where,
                )
        else:
            # vLLM's processor cache answers by mm_hash: a seen uuid gets the item first sent with it
            seen = _seen_uuid(state, reported)
            item = state.cache.get(seen) if seen is not None else None
            if item is not None:
                budget.spend(item.decoded_bytes)
            else:
                item = _process(state, p.spec, p.key, settings, bundle.tokenizer, budget)
                if reported is not None:
                    state.cache.put(p.key, item, alias=reported)
        items.append(item)
        hashes.append(item.mm_hash if reported is None else reported)
    return MediaResult(items, hashes)


# ---------------------------------------------------------------------------------------------
# placeholders and features


def expand(token_ids: list[int], result: MediaResult) -> tuple[list[int], dict[str, list[dict[str, int]]]]:
    """Replace the template's single pad token of each item (prompt order per modality) by the
    item's replacement; ``mm_placeholders`` per modality (``offset`` into the new ids, ``length``).

    The pads are found with ``list.index`` (C speed) and the ids between them copied as slices:
    a cost per item, not per token (a 5,000-token conversation with one image: ~0.77 ms walked
    token by token). A pad token beyond the items of its kind stays as it is.

    Raises:
        InvalidRequest: the template did not emit one placeholder per item.
    """
    queues: dict[int, list[Processed]] = {}
    for item in result.items:
        queues.setdefault(item.pad_token, []).append(item)
    found: list[tuple[int, Processed]] = []  # (position in token_ids, item): the first pads of each kind
    for tid, queue in queues.items():
        at = -1
        for item in queue:
            try:
                at = token_ids.index(tid, at + 1)
            except ValueError:
                raise InvalidRequest(
                    "the chat template did not place every image/video of the messages", param="messages"
                ) from None
            found.append((at, item))
    found.sort(key=lambda pair: pair[0])
    out: list[int] = []
    places: dict[str, list[dict[str, int]]] = {}
    start = 0
    for at, item in found:
        out += token_ids[start:at]
        places.setdefault(item.modality, []).append({"offset": len(out), "length": len(item.replacement)})
        out += item.replacement
        start = at + 1
    out += token_ids[start:]
    return out, places


MODALITY_ORDER = ("image", "video", "audio")
"""The order of the modalities in ``features``' objects: vLLM 0.33 lists images before videos
whatever their order in the messages (seen on a live vLLM with a video part before an image part)."""

_V = TypeVar("_V")


_RANK = {m: i for i, m in enumerate(MODALITY_ORDER)}


def _in_modality_order(by_modality: dict[str, _V]) -> dict[str, _V]:
    if len(by_modality) < 2:  # one modality (nearly every prompt): already in order
        return by_modality
    return dict(sorted(by_modality.items(), key=lambda kv: _RANK.get(kv[0], len(_RANK))))


def features(result: MediaResult, places: dict[str, list[dict[str, int]]], payload: str) -> dict[str, Any]:
    """The ``features`` object (reference §2); ``payload`` ``"none"`` leaves out the tensors.

    ``kwargs_data`` entries are :class:`~.serde.B64Payload` (serialise with
    :func:`~.serde.json_default`, or send them as body pieces)."""
    hashes: dict[str, list[str]] = {}
    kwargs: dict[str, list[serde.B64Payload | None]] = {}
    meta: dict[str, list[str | None]] = {}
    for item, mm_hash in zip(result.items, result.hashes, strict=True):
        hashes.setdefault(item.modality, []).append(mm_hash)
        kwargs.setdefault(item.modality, []).append(item.kwargs_b64)
        meta.setdefault(item.modality, []).append(item.metadata_b64)
    with_tensors = payload != "none"
    hashes, places, kwargs, meta = (_in_modality_order(d) for d in (hashes, places, kwargs, meta))
    return {
        "mm_hashes": hashes,
        "mm_placeholders": places,
        "kwargs_data": kwargs if with_tensors else None,
        "mm_metadata": meta
        if with_tensors and any(v is not None for m in meta.values() for v in m)
        else None,
    }
