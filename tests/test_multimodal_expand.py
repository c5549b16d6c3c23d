"""``expand`` (placeholder expansion) against the token-by-token walk it replaced: the same ids,
the same ``mm_placeholders`` and the same error, on drawn prompts with images and videos, extra
pads and missing ones."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from render_service.errors import InvalidRequest
from render_service.render.multimodal.prompt import MediaResult, Processed, expand
from render_service.render.multimodal.serde import B64Payload

IMAGE_PAD, VIDEO_PAD = 151655, 151656


def _walk(token_ids: list[int], result: MediaResult) -> tuple[list[int], dict[str, Any]]:
    """The walk over every token (the code before): each pad takes the next item of its kind."""
    queues: dict[int, list[Processed]] = {}
    for item in result.items:
        queues.setdefault(item.pad_token, []).append(item)
    out: list[int] = []
    places: dict[str, list[dict[str, int]]] = {}
    for tid in token_ids:
        queue = queues.get(tid)
        if queue:
            item = queue.pop(0)
            places.setdefault(item.modality, []).append({"offset": len(out), "length": len(item.replacement)})
            out.extend(item.replacement)
        else:
            out.append(tid)
    if any(queues.values()):
        raise InvalidRequest("the chat template did not place every image/video of the messages",
                             param="messages")
    return out, places


def _item(modality: str, n: int, fill: int) -> Processed:
    pad = IMAGE_PAD if modality == "image" else VIDEO_PAD
    return Processed(modality, f"h{fill}", (fill,) * n, pad, B64Payload(np.zeros(4, np.uint8)), None)


ITEMS = st.lists(st.tuples(st.sampled_from(["image", "video"]), st.integers(0, 5), st.integers(7, 9)),
                 max_size=4)
IDS = st.lists(st.sampled_from([1, 2, 3, IMAGE_PAD, VIDEO_PAD]), max_size=30)


@given(IDS, ITEMS)
def test_expand_equals_the_token_walk(ids: list[int], drawn: list[tuple[str, int, int]]) -> None:
    items = [_item(*d) for d in drawn]
    try:
        want = _walk(list(ids), MediaResult(list(items), ["h"] * len(items)))
    except InvalidRequest as exc:
        with pytest.raises(InvalidRequest) as got:
            expand(list(ids), MediaResult(list(items), ["h"] * len(items)))
        assert (got.value.message, got.value.param) == (exc.message, exc.param)
        return
    got = expand(list(ids), MediaResult(list(items), ["h"] * len(items)))
    assert got == want
    assert list(got[1]) == list(want[1])  # modality order: the answer's bytes


def test_expand_places_items_in_prompt_order_and_keeps_extra_pads() -> None:
    a, b, v = _item("image", 3, 7), _item("image", 2, 8), _item("video", 1, 9)
    ids = [1, VIDEO_PAD, 2, IMAGE_PAD, IMAGE_PAD, 3, IMAGE_PAD]
    out, places = expand(ids, MediaResult([a, b, v], ["x", "y", "z"]))
    assert out == [1, 9, 2, 7, 7, 7, 8, 8, 3, IMAGE_PAD]
    assert places == {"video": [{"offset": 1, "length": 1}],
                      "image": [{"offset": 3, "length": 3}, {"offset": 6, "length": 2}]}
    assert list(places) == ["video", "image"]
    with pytest.raises(InvalidRequest, match="did not place every image/video"):
        expand([1, IMAGE_PAD], MediaResult([a, b], ["x", "y"]))
