"""Hand memory freed at start-up back to the operating system.

Used by the bundle loader (:mod:`render_service.models`) and the fast encoder's proof
(:mod:`render_service.tokens.prefix_cache`), whose temporary tables are large.
"""

from __future__ import annotations


def release_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``; a no-op
    elsewhere), so start-up temporaries do not stay in the resident set."""
    import ctypes
    import gc

    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass
