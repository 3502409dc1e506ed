"""Plain-loop functions compiled with numba where profiling asked for it (the event loop, interval unions, the
link-load grid, the report's writers): the Python function stays the reference the tests compare with, and the
compiled one is built on first use (numba caches it on disk). AIFABRIC_PURE_PYTHON=1 keeps everything in Python."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable


def pure_python() -> bool:
    """AIFABRIC_PURE_PYTHON set (and not 0): the reference Python paths only."""
    return os.environ.get("AIFABRIC_PURE_PYTHON", "") not in ("", "0")


def compiled(fn: Callable) -> Callable | None:
    """`fn` compiled (nopython, cached on disk), or None without numba or with AIFABRIC_PURE_PYTHON=1."""
    return None if pure_python() else _jit(fn)


@functools.cache
def _jit(fn: Callable) -> Callable | None:
    try:
        from numba import njit
    except ImportError:  # pragma: no cover - numba is a dependency; the Python function is the fallback
        return None
    return njit(cache=True)(fn)
