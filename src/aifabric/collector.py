"""CPython's cyclic garbage collector paused while a stage builds millions of small objects with no cycles (a large
plan's workload, its task graph, the flow engine's run and results): it would only walk them, again and again as they
accumulate (a fifth of a large plan's lowering). Reference counting still frees everything that is dropped; cycles
made meanwhile wait for the next collection."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused(promote: bool = False) -> Iterator[None]:
    """The collector off for the block (as it was before, after it; nested blocks keep it off).

    `promote`: when it resumes, the objects made meanwhile go to its oldest generation instead of staying young, so the
    first collection after the block does not walk them (a run's 0.7 M containers at 1,024 GPUs: 0.2-0.5 s), only a
    full one if the process lives on to make one. `gc.freeze()` then `gc.unfreeze()` moves every tracked object there,
    two list splices; skipped when something else froze objects (gc.get_freeze_count()), whose freeze it would undo."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if promote and not gc.get_freeze_count():
                gc.freeze()
                gc.unfreeze()
            gc.enable()
