"""Compressed sparse rows of a task graph's per-task lists (routes, dependencies), as the engines' loops read them."""

from __future__ import annotations

from itertools import chain

import numpy as np


def csr(lists: list, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The first n int sequences of `lists` -> (pointer array of n + 1, flat values): row t is flat[ptr[t]:ptr[t + 1]]."""
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, lists), dtype=np.int64, count=n), out=ptr[1:])
    flat = np.fromiter(chain.from_iterable(lists), dtype=np.int64, count=int(ptr[-1]))
    return ptr, flat


def turned_round(ptr_in: np.ndarray, flat_in: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Rows of "task -> what it waits for" (`csr` of the deps) turned round into "task -> its dependents": (pointer
    array of n + 1, each task's dependents flat, and for each of those the position in flat_in it came from). The
    dependents in the order an event loop releases them: by dependent, then by position in its list."""
    counts = np.diff(ptr_in)
    order = np.argsort(flat_in, kind="stable")
    flat = np.repeat(np.arange(n, dtype=np.int64), counts)[order]
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(flat_in, minlength=n), out=ptr[1:])
    return ptr, flat, order
