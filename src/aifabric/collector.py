"""CPython's cyclic garbage collector paused while a stage builds millions of small objects with no cycles (a large
plan's workload, its task graph, the flow engine's run and results): it would only walk them, again and again as they
accumulate (a fifth of a large plan's lowering). Reference counting still frees everything that is dropped; cycles
made meanwhile wait for the next collection."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """The collector off for the block (as it was before, after it; nested blocks keep it off)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
