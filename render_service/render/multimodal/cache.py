"""Processed-media cache: item key → encoded item, bounded in bytes, least recently used out.

A multi-turn conversation resends its images every turn; vLLM's render decodes each of them
again to hash its pixels (its processor cache then skips the processing: README "Multimodal
render" measured 11 ms against 21 ms for a 640×480 JPEG's first sight). Here a second sight of the
same item (same bytes, same processing settings) costs a dictionary lookup. Entries can also be
found by their reported ``mm_hash`` (a client ``uuid``), which lets an item be sent as ``uuid``
only once it was seen (as vLLM's processor cache).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Generic, TypeVar

V = TypeVar("V")


class ByteBoundedCache(Generic[V]):
    """Thread-safe LRU bounded by the sum of the entries' sizes (``size(value)`` bytes).

    ``observer(hits, misses)`` is called after each lookup (metrics hook); ``capacity`` 0 disables.
    """

    def __init__(self, capacity: int, size: Callable[[V], int]) -> None:
        self.capacity = capacity
        self._size = size
        self._items: OrderedDict[str, V] = OrderedDict()
        self._aliases: dict[str, str] = {}
        self._bytes = 0
        self._lock = threading.Lock()
        self.observer: Callable[[int, int], None] | None = None
        self.hits = 0
        self.misses = 0

    @property
    def nbytes(self) -> int:
        """Bytes held."""
        return self._bytes

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is held (a plain check: no hit or miss counted, the order unchanged)."""
        return key in self._items

    def alias_of(self, reported: str) -> str:
        """The key a reported hash (a client ``uuid``) names, ``reported`` itself if none."""
        return self._aliases.get(reported, reported)

    def get(self, key: str, alias: bool = False) -> V | None:
        """The value under ``key`` (or, with ``alias``, under the reported hash ``key``)."""
        with self._lock:
            real = self._aliases.get(key, key) if alias else key
            value = self._items.get(real)
            if value is not None:
                self._items.move_to_end(real)
                self.hits += 1
            else:
                self.misses += 1
        if self.observer is not None:
            self.observer(int(value is not None), int(value is None))
        return value

    def put(self, key: str, value: V, alias: str | None = None) -> None:
        """Insert; entries larger than the capacity are not kept."""
        n = self._size(value)
        if n > self.capacity:
            return
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._bytes -= self._size(old)
            self._items[key] = value
            self._bytes += n
            if alias is not None:
                self._aliases[alias] = key
            while self._bytes > self.capacity and self._items:
                gone, value_out = self._items.popitem(last=False)
                self._bytes -= self._size(value_out)
                for a in [a for a, k in self._aliases.items() if k == gone]:
                    del self._aliases[a]
